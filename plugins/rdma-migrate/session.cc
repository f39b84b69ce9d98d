#include "session.h"
#include "trace.h"
#include "vmm/common/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include <cstring>
#include <random>

namespace rdma_migrate {

namespace {
constexpr size_t kMaxPayload = kControlBufferSize - kHeaderSize;

uint64_t new_session_id() {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) | rd();
}

}  // namespace

Session::Session(std::unique_ptr<Endpoint> ep, std::unique_ptr<ControlChannel> ctl, SessionConfig cfg, ChunkGeometry g,
                 uint32_t agreed)
    : ep_(std::move(ep)), ctl_(std::move(ctl)), cfg_(std::move(cfg)), geo_(g), agreed_(agreed),
      max_entries_((agreed & kCapBatch) != 0 ? kMaxRepeat : 1), remote_regs_(cfg_.pin_limit),
      local_regs_(cfg_.pin_limit), served_regs_(cfg_.pin_limit),
      // Without kCapBatch a request names one chunk: the pipeline then asks one chunk ahead.
      ahead_(std::min<uint64_t>(max_entries_, std::max<uint64_t>(1, kRegisterAheadBytes / g.size()))) {
    summary_ = ep_->describe;
    ctl_->error_text((agreed & kCapErrorText) != 0);
    lanes_.emplace_back(ep_.get());
    ctl_->on_other = [this](const ibv_wc& wc) {
        write_completed(lanes_[0], wr_index(wc.wr_id));
        return Status{};
    };
}

Session::~Session() {
    // A destination whose migration went well lets the source hang up first. The source counts
    // its go-ahead delivered only once the go-ahead's completion says so; a hang-up from here
    // could flush it there first, and the source would resume a guest that this side runs.
    // After this side's ERROR there is nothing to wait for; after the source's ERROR, or with
    // the connection gone, the wait ends once the source has hung up (at once if it has).
    if (destination() && !ctl_->sent_error()) ep_->await_peer_hang_up(std::min(cfg_.timeouts.io_ms, kHangUpWaitMs));
    // Stop all DMA before any buffer or MR goes: disconnect (which flushes the posted
    // receives and writes) and destroy the QPs first; the members then unwind (MRs before the
    // PD). Writes still in flight are not waited for: a completed migration drained them at
    // the end of its last round, and a failed one may have a connection (or a device) that
    // will never complete them.
    for (Lane& lane : lanes_) lane.ep->hang_up();  // one per channel: ep_ and every extra_
}

Status Session::connect_channels(const std::string& host, uint16_t port, PrivateData first) {
    for (uint32_t i = 1; i < first.channels; ++i) {
        PrivateData ours = first;
        ours.channel = i;
        auto ep = connect_endpoint(host, port, ours, cfg_.cancel_fd, cfg_.timeouts, [](Endpoint&) { return Status{}; },
                                   ep_->protection_domain());
        if (!ep) return ep.error().context(fmt::format("RDMA channel {} of {}", i, first.channels));
        extra_.push_back(std::move(*ep));
        lanes_.emplace_back(extra_.back().get());
    }
    return {};
}

Status Session::accept_channels() {
    for (uint32_t i = 1; i < ep_->peer.channels; ++i) {
        auto ep = accept_channel(*ep_, i);
        if (!ep) return ep.error();
        extra_.push_back(std::move(*ep));
        lanes_.emplace_back(extra_.back().get());
    }
    return {};
}

namespace {
// What a source offers beyond pin-all.
uint32_t extensions(const SessionConfig& cfg) {
    if (cfg.base_protocol) return 0;
    return kCapChunkSize | kCapBatch | kCapErrorText | kCapSums | (cfg.channels > 1 ? kCapChannels : 0u);
}
}  // namespace

Result<std::unique_ptr<Session>> Session::connect(const std::string& host, uint16_t port, SessionConfig cfg) {
    auto asked = ChunkGeometry::make(cfg.chunk_size);
    if (!asked) return asked.error();
    std::unique_ptr<ControlChannel> ctl;
    PrivateData ours;
    ours.version = cfg.announce_version;
    ours.flags = (cfg.pin_all ? kCapPinAll : 0) | extensions(cfg);
    ours.chunk_shift = static_cast<uint32_t>(std::countr_zero(asked->size()));
    if ((ours.flags & kCapChannels) != 0) {
        ours.channels = cfg.channels;
        ours.session = new_session_id();
    }
    auto ep = connect_endpoint(host, port, ours, cfg.cancel_fd, cfg.timeouts, ControlChannel::make_on(ctl));
    if (!ep) return ep.error();
    uint32_t agreed = (*ep)->peer.flags & ours.flags;  // the destination answers with what it grants
    bool asked_pin_all = cfg.pin_all;
    cfg.pin_all = (agreed & kCapPinAll) != 0;
    if ((agreed & kCapChannels) == 0) ours.channels = 1;
    ChunkGeometry g = (agreed & kCapChunkSize) != 0 ? *asked : *ChunkGeometry::make(ChunkGeometry::kDefault);
    std::string notes;
    auto note = [&notes](const char* n) { notes += (notes.empty() ? "" : "; ") + std::string(n); };
    if (asked_pin_all && !cfg.pin_all) note("the destination did not grant rdma-pin-all: its log says why");
    if (g.size() != asked->size()) note("the destination takes only the base protocol's 1 MiB chunks");
    if (cfg.channels > ours.channels) note("the destination takes only one channel");
    std::unique_ptr<Session> s(new Session(std::move(*ep), std::move(ctl), std::move(cfg), g, agreed));
    if (Status st = s->connect_channels(host, port, ours); !st) {
        s->abort(st.error().message());
        return st.error();
    }
    s->summarize(notes);
    return s;
}

Result<std::unique_ptr<Session>> Session::accept(Endpoint& listener, SessionConfig cfg,
                                                 const std::string& pin_all_refusal) {
    std::unique_ptr<ControlChannel> ctl;
    uint32_t supported = (cfg.base_protocol ? 0 : kExtensionCaps) | (pin_all_refusal.empty() ? kCapPinAll : 0u);
    auto ep = accept_endpoint(listener, supported, ControlChannel::make_on(ctl));
    if (!ep) return ep.error();
    uint32_t agreed = (*ep)->peer.flags & supported;
    bool asked_pin_all = ((*ep)->peer.flags & kCapPinAll) != 0;
    cfg.pin_all = (agreed & kCapPinAll) != 0;
    if ((agreed & kCapChannels) == 0) {
        (*ep)->peer.channel = 0;
        (*ep)->peer.channels = 1;
    }
    // Chunk numbers and addresses in requests follow the source's chunks: its size, if granted.
    uint64_t chunk = (agreed & kCapChunkSize) != 0 ? 1ull << (*ep)->peer.chunk_shift : ChunkGeometry::kDefault;
    auto g = ChunkGeometry::make(chunk);
    if (!g) return g.error();
    std::unique_ptr<Session> s(new Session(std::move(*ep), std::move(ctl), std::move(cfg), *g, agreed));
    if (Status st = s->accept_channels(); !st) {
        s->abort(st.error().message());
        return st.error();
    }
    s->summarize(asked_pin_all && !s->pin_all() ? pin_all_refusal : "");
    return s;
}

void Session::summarize(const std::string& note) {
    std::string mode = cfg_.pin_all ? "rdma-pin-all" : "dynamic registration";
    if (!cfg_.pin_all && cfg_.pin_limit != 0) mode += ", rdma-pin-limit " + vmm::format_size(cfg_.pin_limit);
    summary_ = fmt::format("{}: {}, {} chunks, {} channel{}", ep_->describe, mode, vmm::format_size(geo_.size()),
                           lanes_.size(), lanes_.size() == 1 ? "" : "s");
    if ((agreed_ & kExtensionCaps) == 0) summary_ += ", base protocol (no vmm extension agreed)";
    if (!note.empty()) summary_ += " (" + note + ")";
}

// Once the destination has accepted the stream's header (ram_setup, or the first round), ask
// for the destination's RAM blocks: QEMU asks after its stream's first bytes, at the end of its
// setup. With rdma-pin-all this side's RAM is pinned
// while the destination pins its own, as QEMU does.
Status Session::exchange_blocks_source() {
    if (auto s = ctl_->exchange_send(encode_empty(Command::ram_blocks_request), ControlChannel::Sent::later); !s) return s;
    if (cfg_.pin_all)
        if (auto s = pin_blocks(Use::pin_all_read); !s) return s;
    auto m = ctl_->answer(Command::ram_blocks_result);
    if (!m) return m.error();
    auto blocks = decode_blocks(*m);
    if (!blocks) return blocks.error();
    if (auto s = check_block_lists(cfg_.blocks, *blocks); !s) return s;
    if (cfg_.pin_all) {
        for (size_t i = 0; i < blocks->size(); ++i)
            if ((*blocks)[i].rkey == 0) return Error(fmt::format("rdma-pin-all: the destination sent no rkey for '{}'", cfg_.blocks[i].name));
    }
    remote_ = std::move(*blocks);
    blocks_known_ = true;
    return {};
}

// rdma-pin-all: every RAM block registered whole during setup, on both sides (as QEMU does),
// not inside the bulk round: pinning all of RAM is setup work, and the rounds that follow
// register nothing. `use`: remote write on the destination; local read only on the source,
// which never registers memory for remote access.
Status Session::pin_blocks(Use use) {
    for (const auto& b : cfg_.blocks) {
        auto mr = ep_->memory().register_memory(b.host, b.length, use, fmt::format("RAM block '{}' whole (rdma-pin-all)", b.name));
        if (!mr) return mr.error();
        trace("{}: RAM block '{}' registered for rdma-pin-all ({} bytes)", destination() ? "destination" : "source", b.name,
              b.length);
        pinned_blocks_.push_back(std::move(*mr));
    }
    return {};
}

Status Session::handle_blocks_request() {
    if (blocks_known_) return Error("a second RAM BLOCKS REQUEST");
    if (cfg_.pin_all)
        if (auto s = pin_blocks(Use::pin_all_written); !s) return s;
    std::vector<BlockDesc> descs;
    for (size_t i = 0; i < cfg_.blocks.size(); ++i) {
        const LocalBlock& b = cfg_.blocks[i];
        descs.push_back({reinterpret_cast<uint64_t>(b.host), b.offset, b.length, cfg_.pin_all ? pinned_blocks_[i]->rkey : 0});
    }
    blocks_known_ = true;
    return ctl_->reply(encode_blocks(descs));
}

// ---- byte stream -------------------------------------------------------------------------

Status Session::write(const void* data, size_t len) {
    auto* p = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), p, p + len);
    while (out_.size() >= kMaxPayload) {
        if (auto s = ctl_->exchange_send(encode_message(Command::qemu_file, 1, {out_.data(), kMaxPayload})); !s) return s;
        out_.erase(out_.begin(), out_.begin() + static_cast<long>(kMaxPayload));
    }
    return {};
}

Status Session::flush() {
    if (out_.empty()) return {};
    auto s = ctl_->exchange_send(encode_message(Command::qemu_file, 1, out_));
    out_.clear();
    return s;
}

// Stream bytes. A destination also answers the source's RAM BLOCKS REQUEST here: the source
// sends it (ram_setup) once the destination has accepted the header, while the destination
// reads the stream, so both sides are set up (pin-all: pinned) before the first round, as QEMU
// does in its setup.
Status Session::read(void* out, size_t len) {
    auto* p = static_cast<uint8_t*>(out);
    while (len > 0) {
        if (in_pos_ == in_.size()) {
            auto m = ctl_->exchange_recv({Command::qemu_file, Command::ram_blocks_request});
            if (!m) return m.error();
            if (m->header.type == Command::ram_blocks_request) {
                if (!destination()) return Error("RDMA control channel: a RAM BLOCKS REQUEST from the destination");
                if (auto s = handle_blocks_request(); !s) return s;
                continue;
            }
            in_ = std::move(m->data);
            in_pos_ = 0;
            continue;
        }
        size_t n = std::min(len, in_.size() - in_pos_);
        std::memcpy(p, in_.data() + in_pos_, n);
        in_pos_ += n;
        p += n;
        len -= n;
    }
    return {};
}

}  // namespace rdma_migrate

#include "source_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <bit>
#include <random>

#include "trace.h"
#include "vmm/common/units.h"

namespace rdma_migrate {

namespace {
uint64_t new_session_id() {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) | rd();
}

// x-rdma-postcopy-read: pages read by the destination come without verify-ram's sums, so not
// under verify-ram; on an authenticated link they come with tags (docs/rdma-protocol.md, "Faults
// by RDMA READ").
bool reads_offered(const SessionConfig& cfg) { return cfg.postcopy && cfg.postcopy_read && !cfg.verify; }

// What a source offers beyond pin-all.
uint32_t extensions(const SessionConfig& cfg) {
    if (cfg.base_protocol) return 0;
    // The postcopy channel is one more connection, counted among the channels after the lanes.
    bool more = cfg.channels > 1 || cfg.postcopy;
    return kCapChunkSize | kCapBatch | kCapErrorText | kCapSums | (more ? kCapChannels : 0u) |
           (cfg.postcopy ? kCapPostcopy : 0u) | (reads_offered(cfg) ? kCapPostcopyRead : 0u) |
           (reads_offered(cfg) && cfg.postcopy_read_push ? kCapPostcopyReadPush : 0u);
}
}  // namespace

SourceSession::SourceSession(std::unique_ptr<Endpoint> ep, std::unique_ptr<ControlChannel> ctl, SessionConfig cfg,
                             ChunkGeometry g, uint32_t agreed)
    : link_(std::move(ep), std::move(ctl), std::move(cfg), g, agreed,
            [] { return Status(Error("RDMA control channel: a RAM BLOCKS REQUEST from the destination")); }),
      ctl_(link_.control()), cfg_(link_.config()), geo_(g),
      lanes_(ctl_, link_.first(),
             {.sums_due = [this] { return sums_due(); },
              .send_sums = [this] { return flush_sums(false); },
              .landed = [this](uint64_t range) { sums_.write_landed(range); }}),
      remote_regs_(ctl_, remote_, cfg_.blocks, g, link_.max_entries(), cfg_.pin_limit,
                   {.drain_writes = [this] { return lanes_.drain(); },
                    .between_answers = [this] { return flush_sums(false); },
                    .write = [this](const QueuedPiece& q) { return write_piece(q.block, q.piece); },
                    .written = [this] { return lanes_.post_short_batches(); }}),
      local_regs_(cfg_.pin_limit) {}

// Stop all DMA before any buffer or MR of this side goes.
SourceSession::~SourceSession() { link_.hang_up(); }

Result<std::unique_ptr<SourceSession>> SourceSession::connect(const std::string& host, uint16_t port, SessionConfig cfg) {
    auto asked = ChunkGeometry::make(cfg.chunk_size);
    if (!asked) return asked.error();
    std::unique_ptr<ControlChannel> ctl;
    PrivateData ours;
    ours.version = cfg.announce_version;
    ours.flags = (cfg.pin_all ? kCapPinAll : 0) | extensions(cfg) | (cfg.tls ? kCapTls : 0u);
    ours.chunk_shift = static_cast<uint32_t>(std::countr_zero(asked->size()));
    if ((ours.flags & kCapChannels) != 0) {
        ours.channels = cfg.channels + (cfg.postcopy ? 1 : 0);
        ours.session = new_session_id();
    }
    auto ep = connect_endpoint(host, port, ours, cfg.cancel_fd, cfg.timeouts, ControlChannel::make_on(ctl));
    if (!ep) return ep.error();
    uint32_t agreed = (*ep)->peer.flags & ours.flags;  // the destination answers with what it grants
    bool asked_pin_all = cfg.pin_all;
    cfg.pin_all = (agreed & kCapPinAll) != 0;
    if ((agreed & kCapChannels) == 0) ours.channels = 1;
    uint32_t lanes = (agreed & kCapChannels) != 0 ? cfg.channels : 1;
    bool postcopy_channel = (agreed & kCapPostcopy) != 0;
    // A destination that cannot agree a size (QEMU) uses the one it was set to: QEMU's rule, the
    // same x-rdma-chunk-size on both ends, so this side keeps its own.
    ChunkGeometry g = *asked;
    std::string notes;
    auto note = [&notes](const char* n) { notes += (notes.empty() ? "" : "; ") + std::string(n); };
    if (asked_pin_all && !cfg.pin_all) note("the destination did not grant rdma-pin-all: its log says why");
    std::string chunk_note = fmt::format("the destination cannot agree a chunk size (QEMU): x-rdma-chunk-size must be {} "
                                         "there too",
                                         vmm::format_size(g.size()));
    if ((agreed & kCapChunkSize) == 0 && g.size() != ChunkGeometry::kDefault) note(chunk_note.c_str());
    if (cfg.channels > lanes) note("the destination takes only one channel");
    if (cfg.postcopy && !postcopy_channel) note("the destination has no postcopy channel: postcopy-ram is off there");
    if (cfg.postcopy_read && cfg.postcopy && cfg.verify)
        note("x-rdma-postcopy-read is not used with verify-ram: missing pages are asked for");
    else if (reads_offered(cfg) && postcopy_channel && (agreed & kCapPostcopyRead) == 0)
        note("the destination does not read pages by RDMA READ (x-rdma-postcopy-read off there, or verify-ram on "
             "there): missing pages are asked for");
    else if (reads_offered(cfg) && cfg.postcopy_read_push && postcopy_channel && (agreed & kCapPostcopyReadPush) == 0)
        note("the destination does not read the push itself (an older vmm): the push is written");
    std::unique_ptr<SourceSession> s(new SourceSession(std::move(*ep), std::move(ctl), std::move(cfg), g, agreed));
    std::vector<TimedStep> steps;
    StepClock clock(steps);
    if (Status st = s->authenticate(); !st) return st.error();
    if (s->cfg_.tls) clock.mark("tls");
    if (Status st = s->connect_channels(host, port, ours, lanes, postcopy_channel); !st) {
        s->link_.abort(st.error().message());
        return st.error();
    }
    if (lanes > 1 || postcopy_channel) clock.mark("channels");
    s->link_.add_steps(steps);
    s->link_.summarize(notes);
    return s;
}

// tls-creds: the handshake comes first, before the channels and before anything else is said.
Status SourceSession::authenticate() {
    if (!cfg_.tls) return {};
    if (!link_.authenticated()) {
        std::string why = fmt::format("{} does not authenticate RDMA migrations (a vmm without tls-creds, or QEMU): set "
                                      "tls-creds there, or clear it here to migrate unauthenticated",
                                      link_.first().describe);
        link_.abort("the source has tls-creds set and takes only an authenticated migration");
        return Error(why);
    }
    vmm::stream::TlsSetup setup = *cfg_.tls;
    setup.role = vmm::stream::TlsRole::client;
    return ctl_.secure(setup);
}

// Lanes 1..lanes-1, then the postcopy channel (index `lanes`) when it was agreed.
Status SourceSession::connect_channels(const std::string& host, uint16_t port, PrivateData first, uint32_t lanes,
                                       bool postcopy_channel) {
    for (uint32_t i = 1; i < lanes; ++i) {
        PrivateData ours = first;
        ours.channel = i;
        auto ep = connect_endpoint(host, port, ours, cfg_.cancel_fd, cfg_.timeouts, [](Endpoint&) { return Status{}; },
                                   link_.channels().protection_domain());
        if (!ep) return ep.error().context(fmt::format("RDMA channel {} of {}", i, first.channels));
        lanes_.add_lane(**ep);
        link_.channels().add(std::move(*ep));
    }
    if (!postcopy_channel) return {};
    PrivateData ours = first;
    ours.channel = lanes;
    auto keys = link_.postcopy_keys();
    if (!keys) return keys.error();
    std::unique_ptr<PostcopySource> pc;
    auto ep = connect_endpoint(host, port, ours, cfg_.cancel_fd, cfg_.timeouts, [&](Endpoint& e) {
        pc = std::make_unique<PostcopySource>(e, cfg_.blocks, std::move(*keys),
                                              ReadExposure{link_.agreed(kCapPostcopyRead), cfg_.pin_limit,
                                                           link_.agreed(kCapPostcopyReadPush), cfg_.pull_rate});
        return pc->post_receives();
    }, link_.channels().protection_domain(), QpShape{true, kPcSourceReceives});
    if (!ep) return ep.error().context("the RDMA postcopy channel");
    link_.channels().set_postcopy(std::move(*ep));
    postcopy_ = std::move(pc);
    return {};
}

// Once the destination has accepted the stream's header (ram_setup, or the first round), ask
// for the destination's RAM blocks: QEMU asks after its stream's first bytes, at the end of its
// setup. With rdma-pin-all this side's RAM is pinned
// while the destination pins its own, as QEMU does.
Status SourceSession::exchange_blocks() {
    std::vector<TimedStep> steps;
    StepClock clock(steps);
    if (auto s = ctl_.exchange_send(encode_empty(Command::ram_blocks_request), ControlChannel::Sent::later); !s) return s;
    // With rdma-pin-all the destination answers once it has pinned all of its RAM, and says
    // nothing meanwhile: the wait allows x-io-timeout beyond twice what pinning the same RAM
    // took here (a large guest's pinning may outlast x-io-timeout; under TCG 256 MiB did 3 s).
    int io_timeout_ms = link_.first().io_timeout_ms;
    if (cfg_.pin_all) {
        auto t0 = std::chrono::steady_clock::now();
        if (auto s = link_.pin_blocks(Use::pin_all_read); !s) return s;
        clock.mark("pin");  // this side's RAM, while the destination pins its own
        auto pin_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
        link_.first().io_timeout_ms = static_cast<int>(std::min<int64_t>(io_timeout_ms + 2 * pin_ms, INT32_MAX));
    }
    auto m = ctl_.answer(Command::ram_blocks_result);
    link_.first().io_timeout_ms = io_timeout_ms;
    if (!m) return m.error();
    clock.mark("blocks");  // the destination's RAM BLOCKS RESULT (with rdma-pin-all: once pinned there)
    link_.add_steps(steps);
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

Status SourceSession::ram_begin_round(uint32_t round) {
    compress_.clear();
    sums_.new_round();
    work_ = RoundWork{round};
    remote_regs_.new_round();
    return ram_setup();
}

Status SourceSession::ram_end_round() {
    if (auto s = remote_regs_.finish(); !s) return s;
    if (auto s = flush_compress(); !s) return s;
    if (auto s = lanes_.drain(); !s) return s;
    if (auto s = finish_sums(); !s) return s;
    if (tracing()) trace_round();
    return ctl_.exchange_send(encode_empty(Command::register_finished));
}

// ram_chunks() walks the blocks: only when someone reads the line.
void SourceSession::trace_round() const {
    uint64_t total = ram_chunks();
    const auto& remote = remote_regs_.counts();
    trace("source: round {} work: {} chunk writes, {} remote registrations, {} remote unregistrations, "
          "{} local registrations, {} local unregistrations; {} chunks registered now of {} in RAM",
          work_.round, work_.pieces, remote.registered, remote.released, work_.local_registered, work_.local_released,
          cfg_.pin_all ? total : remote_regs_.size(), total);
}

}  // namespace rdma_migrate

#include "destination_session.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "trace.h"
#include "vmm/common/log.h"
#include "vmm/common/units.h"

namespace rdma_migrate {

DestinationSession::DestinationSession(std::unique_ptr<Endpoint> ep, std::unique_ptr<ControlChannel> ctl,
                                       SessionConfig cfg, ChunkGeometry g, uint32_t agreed)
    : link_(std::move(ep), std::move(ctl), std::move(cfg), g, agreed, [this] { return blocks_requested(); }),
      ctl_(link_.control()), cfg_(link_.config()), geo_(g), served_regs_(cfg_.pin_limit) {}

// A destination whose migration went well lets the source hang up first. The source counts its
// go-ahead delivered only once the go-ahead's completion says so; a hang-up from here could
// flush it there first, and the source would resume a guest that this side runs. After this
// side's ERROR there is nothing to wait for; after the source's ERROR, or with the connection
// gone, the wait ends once the source has hung up (at once if it has). Then all DMA stops
// before any buffer or MR of this side goes.
DestinationSession::~DestinationSession() {
    // A lost link has nobody to wait for.
    if (!ctl_.sent_error() && !link_.link_lost()) link_.first().await_peer_hang_up(std::min(cfg_.timeouts.io_ms, kHangUpWaitMs));
    // The listening id goes back to the listener (if it is still there), which then waits for
    // the next source: a precopy that resumes after a broken link (x-resume-window).
    if (auto l = listener_.lock()) link_.first().give_back_listener(*l);
    trace("{}: session ended (link lost: {}); the listening id is back with the listener", link_.first().describe,
          link_.link_lost());
    link_.hang_up();
}

Result<std::unique_ptr<DestinationSession>> DestinationSession::accept(Endpoint& listener, SessionConfig cfg,
                                                 const std::string& pin_all_refusal, int wait_ms,
                                                 const std::weak_ptr<Endpoint>& give_back) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(wait_ms, 0));
    for (;;) {
        bool peer_refused = false;
        int left = wait_ms < 0 ? -1
                              : static_cast<int>(std::max<int64_t>(
                                    0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count()));
        auto s = accept_one(listener, cfg, pin_all_refusal, peer_refused, left, give_back);
        if (s) return s;
        if (peer_refused) {
            vmm::log::warn("{}: refused a connection: {}; still waiting for the migration source", listener.describe,
                           s.error().message());
        } else if (s.error().sys_errno() == ECONNABORTED) {
            vmm::log::warn("{}: a connection from the source was not made: {}; still waiting for the migration source",
                           listener.describe, s.error().message());
        } else {
            return s;
        }
    }
}

// x-rdma-chunk-size: a source that says its size is followed, unless this side was set to
// another: refused then, in one line, before any rkey or block is sent.
Status DestinationSession::check_chunk_size(const PrivateData& theirs, const SessionConfig& cfg) {
    if ((theirs.flags & kCapChunkSize) == 0 || !cfg.chunk_size_set) return {};
    uint64_t source = 1ull << theirs.chunk_shift;
    if (source == cfg.chunk_size) return {};
    return Error(fmt::format("x-rdma-chunk-size: the source uses {} chunks, this destination was set to {}: set the same "
                             "on both sides",
                             vmm::format_size(source), vmm::format_size(cfg.chunk_size)));
}

// A request this side turns down before anything else: a chunk size it was told otherwise, or
// no authentication when tls-creds is set here.
Status DestinationSession::admissible(const PrivateData& theirs, const SessionConfig& cfg) {
    if ((theirs.flags & kCapPull) != 0) {
        return Error("a clone asked to pull (rdma-pull:) from an RDMA migration destination: a clone pulls from a vmm "
                     "that serves a saved guest (x-pull-serve)");
    }
    if (auto s = check_chunk_size(theirs, cfg); !s) return s;
    if (cfg.tls && (theirs.flags & kCapTls) == 0) {
        return Error("the source did not offer an authenticated migration (tls-creds is set here: set it at the source "
                     "too; QEMU cannot)");
    }
    return {};
}

Result<std::unique_ptr<DestinationSession>> DestinationSession::accept_one(Endpoint& listener, SessionConfig cfg,
                                                                           const std::string& pin_all_refusal,
                                                                           bool& peer_refused, int wait_ms,
                                                                           const std::weak_ptr<Endpoint>& give_back) {
    std::unique_ptr<ControlChannel> ctl;
    uint32_t supported = (cfg.base_protocol ? 0 : kExtensionCaps & ~(kCapTls | kCapPull)) | (pin_all_refusal.empty() ? kCapPinAll : 0u);
    if (!cfg.postcopy) supported &= ~kCapPostcopy;
    if (!cfg.postcopy || !cfg.postcopy_read || cfg.verify) supported &= ~(kCapPostcopyRead | kCapPostcopyReadPush);
    if (cfg.tls) supported |= kCapTls;
    Admit admit = [&peer_refused, &cfg](const PrivateData& theirs) -> Status {
        Status s = admissible(theirs, cfg);
        if (!s) peer_refused = true;
        return s;
    };
    auto ep = accept_endpoint(listener, supported, ControlChannel::make_on(ctl), admit, wait_ms);
    if (!ep) return ep.error();
    uint32_t agreed = (*ep)->peer.flags & supported;
    bool asked_pin_all = ((*ep)->peer.flags & kCapPinAll) != 0;
    cfg.pin_all = (agreed & kCapPinAll) != 0;
    if ((agreed & kCapChannels) == 0) {
        (*ep)->peer.channel = 0;
        (*ep)->peer.channels = 1;
    }
    // Chunk numbers and addresses in requests follow the source's chunks: its size, if it said
    // it (checked against this side's own by check_chunk_size); a peer that cannot say it (QEMU)
    // uses the size it was set to, as this side must be: QEMU's rule, the same on both ends.
    uint64_t chunk = (agreed & kCapChunkSize) != 0 ? 1ull << (*ep)->peer.chunk_shift : cfg.chunk_size;
    auto g = ChunkGeometry::make(chunk);
    if (!g) return g.error();
    std::optional<vmm::stream::TlsSetup> tls = cfg.tls;
    std::unique_ptr<DestinationSession> s(new DestinationSession(std::move(*ep), std::move(ctl), std::move(cfg), *g, agreed));
    s->listener_ = give_back;
    std::vector<TimedStep> steps;
    StepClock clock(steps);
    if (tls) {  // before anything else: no rkey, no block, no channel for a peer not authenticated
        tls->role = vmm::stream::TlsRole::server;
        if (Status st = s->ctl_.secure(*tls); !st) {
            s->link_.first().give_back_listener(listener);
            peer_refused = true;
            return st.error();
        }
        clock.mark("tls");
    }
    if (Status st = s->accept_channels(); !st) {
        s->link_.abort(st.error().message());
        // A source that gave up midway, or a network that lost it (a flap): the next may come.
        bool went = s->link_.first().device_removed || st.error().sys_errno() == ECANCELED;
        return went ? st.error() : Error::with_errno(st.error().message(), ECONNABORTED);
    }
    s->link_.first().early_requests.refuse_all("a migration is in progress");  // every channel is here: strangers
    if (s->link_.channels().count() > 1 || s->link_.channels().has_postcopy()) clock.mark("channels");
    s->link_.add_steps(steps);
    std::string note = asked_pin_all && !s->link_.pin_all() ? pin_all_refusal : "";
    if (const auto& ahead = s->link_.first().ahead; ahead && !s->link_.pin_all()) {
        ahead->release();  // dynamic registration: what was pinned while waiting is not needed
        note += std::string(note.empty() ? "" : "; ") + "the RAM pinned while waiting was unpinned: the source did not ask for rdma-pin-all";
    }
    s->link_.summarize(note);
    return s;
}

// The lanes, then the postcopy channel if it was agreed. A source that asked for one counts it
// among its channels whether or not it was granted.
Status DestinationSession::accept_channels() {
    Endpoint& first = link_.first();
    uint32_t lanes = first.peer.channels - ((first.peer.flags & kCapPostcopy) != 0 && first.peer.channels > 1 ? 1 : 0);
    for (uint32_t i = 1; i < lanes; ++i) {
        auto ep = accept_channel(first, i);
        if (!ep) return ep.error();
        link_.channels().add(std::move(*ep));
    }
    if (!link_.agreed(kCapPostcopy)) return {};
    auto keys = link_.postcopy_keys();
    if (!keys) return keys.error();
    auto ep = accept_channel(first, lanes, QpShape{true, kPcRequestSlots + kPcPushSlots + 8});
    if (!ep) return ep.error().context("the RDMA postcopy channel");
    postcopy_ = std::make_unique<PostcopyDestination>(link_.channels().set_postcopy(std::move(*ep)), cfg_.blocks,
                                                      std::move(*keys), link_.agreed(kCapPostcopyRead),
                                                      link_.agreed(kCapPostcopyReadPush),
                                                      std::chrono::microseconds(cfg_.postcopy_read_wait_us));
    return postcopy_->post_receives();
}

Status DestinationSession::begin_postcopy() {
    if (!postcopy_) return Error("RDMA: this connection has no postcopy channel: postcopy-ram was off at one end when it connected");
    served_regs_.clear();
    link_.pinned().unpin();
    trace("destination: postcopy: the precopy rounds' registrations of guest RAM are gone");
    return postcopy_->begin();
}

Status DestinationSession::blocks_requested() {
    if (blocks_known_) return Error("a second RAM BLOCKS REQUEST");
    std::vector<TimedStep> steps;
    StepClock clock(steps);
    if (cfg_.pin_all) {
        auto& pinning = link_.first().ahead;
        auto ahead = pinning ? pinning->take(cfg_.blocks) : std::nullopt;
        if (ahead) {
            link_.pinned().adopt(std::move(*ahead));  // what is left of the pinning, if it is still at work
            vmm::log::info("rdma-pin-all: this side's RAM was pinned while it waited for the source ({:.0f} ms)",
                           pinning->pin_ms());
        } else if (auto s = link_.pin_blocks(Use::pin_all_written); !s) {
            return s;
        }
        clock.mark("pin");
    }
    std::vector<BlockDesc> descs;
    for (size_t i = 0; i < cfg_.blocks.size(); ++i) {
        const LocalBlock& b = cfg_.blocks[i];
        descs.push_back({reinterpret_cast<uint64_t>(b.host), b.offset, b.size, cfg_.pin_all ? link_.pinned().rkey(i) : 0});
    }
    blocks_known_ = true;
    Status s = ctl_.reply(encode_blocks(descs));
    clock.mark("blocks");
    link_.add_steps(steps);
    return s;
}

Status DestinationSession::handle_register(const Message& m) {
    if (cfg_.pin_all) return Error("REGISTER REQUEST although rdma-pin-all registered everything");
    auto entries = decode_register_entries(m);
    if (!entries) return entries.error();
    std::vector<ChunkSpan> checked;
    for (const auto& r : *entries) {  // every entry is checked before anything is registered
        auto sp = check_register_entry(r, cfg_.blocks, geo_);
        if (!sp) return sp.error();
        checked.push_back(*sp);
    }
    std::vector<RegisterResult> results;
    for (size_t i = 0; i < entries->size(); ++i) {
        uint32_t block = (*entries)[i].block;
        const LocalBlock& b = cfg_.blocks[block];
        const ChunkSpan& sp = checked[i];
        ChunkKey key{block, sp.first};
        MemoryRegion* mr = served_regs_.find(key);
        if (mr == nullptr) {
            auto victims = served_regs_.victims_for(sp.length);
            if (!victims) return victims.error();
            if (!victims->empty()) {
                return Error(fmt::format("the source exceeded rdma-pin-limit ({} bytes) without unregistering first",
                                         served_regs_.limit()));
            }
            auto reg = link_.first().memory().register_memory(b.host + sp.offset, sp.length, Use::chunk_written,
                                                     fmt::format("chunk {} of '{}'", sp.first, b.name));
            if (!reg) return reg.error();
            trace("destination: chunk {}:{} registered, rkey {:#x} at {:#x}+{:#x}", block, sp.first, (*reg)->rkey,
                  reinterpret_cast<uint64_t>(b.host) + sp.offset, sp.length);
            served_regs_.insert(key, sp.length, std::move(*reg));
            mr = served_regs_.find(key);
        }
        results.push_back({(*mr)->rkey, reinterpret_cast<uint64_t>(b.host)});  // the block's start, as QEMU answers
    }
    return ctl_.reply(encode_register_results(results));
}

Status DestinationSession::handle_unregister(const Message& m) {
    auto entries = decode_register_entries(m);
    if (!entries) return entries.error();
    std::vector<ChunkKey> keys;
    for (const auto& r : *entries) {
        auto sp = check_unregister_entry(r, cfg_.blocks, geo_);
        if (!sp) return sp.error();
        keys.push_back({r.block, sp->first});
    }
    for (const auto& k : keys) {
        trace("destination: chunk {}:{} unregistered", k.block, k.chunk);
        served_regs_.erase(k);
    }
    return ctl_.reply(encode_empty(Command::unregister_finished));
}

Status DestinationSession::handle_compress(const Message& m) {
    auto entries = decode_compress(m);
    if (!entries) return entries.error();
    std::vector<uint64_t> at;  // offsets in the blocks
    for (const auto& c : *entries) {
        auto off = check_compress(c, cfg_.blocks);
        if (!off) return off.error();
        at.push_back(*off);
    }
    for (size_t i = 0; i < entries->size(); ++i) {
        const Compress& c = (*entries)[i];
        uint8_t* dst = cfg_.blocks[c.block].host + at[i];
        bool pinned = cfg_.pin_all;
        for (uint64_t ch = geo_.index(at[i]); !pinned && ch <= geo_.index(at[i] + c.length - 1); ++ch)
            pinned = served_regs_.contains({c.block, ch});
        // Unpinned memory can drop its pages (it reads back as zero and stays unpopulated);
        // pinned pages must stay the ones the HCA writes to, so those are cleared in place.
        if (pinned || c.value != 0 || ::madvise(dst, c.length, MADV_DONTNEED) != 0) std::memset(dst, static_cast<int>(c.value), c.length);
    }
    return {};
}

// Whatever ends a round early (a refused entry, an undecodable or unexpected message, a dead
// connection) is told to the source as ERROR, where the connection still carries it.
Status DestinationSession::serve_round(uint32_t) {
    Status s = serve_messages();
    if (!s && !link_.link_lost()) ctl_.send_error(s.error().message());  // a lost link: the precopy may resume
    return s;
}

Status DestinationSession::serve_messages() {
    for (;;) {
        auto m = ctl_.exchange_recv({Command::register_request, Command::compress, Command::unregister_request,
                                      Command::register_finished, Command::ram_blocks_request, Command::sums});
        if (!m) return m.error();
        Status s;
        switch (m->header.type) {
            case Command::ram_blocks_request: s = blocks_requested(); break;
            case Command::register_request: s = handle_register(*m); break;
            case Command::unregister_request: s = handle_unregister(*m); break;
            case Command::compress: s = handle_compress(*m); break;
            case Command::sums: s = handle_sums(*m); break;
            case Command::register_finished: return {};
            default: return Error(fmt::format("unexpected {} during a RAM round", to_string(m->header.type)));
        }
        if (!s) return s;
    }
}

Status DestinationSession::handle_sums(const Message& m) {
    if (!link_.carries_sums()) return Error("SUMS from a source that did not agree on the sums extension");
    if (!sums_fn_) return Error("SUMS, but verify-ram sums were not asked for on this side (the migration stream did not announce them)");
    auto entries = decode_sums(m);
    if (!entries) return entries.error();
    for (const SumsEntry& e : *entries)  // every entry is checked before any is handed on
        if (auto s = check_sums_entry(e, cfg_.blocks); !s) return s;
    for (const SumsEntry& e : *entries)
        if (auto s = sums_fn_(e.block, e.offset, e.sums); !s) return s;
    return {};
}

}  // namespace rdma_migrate

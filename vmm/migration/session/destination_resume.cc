// PrecopyWait (destination_resume.h).
#include "vmm/migration/session/destination_resume.h"

#include <fmt/format.h>

#include <cerrno>

#include "vmm/common/elapsed.h"
#include "vmm/common/log.h"
#include "vmm/migration/precopy/machine_state.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

Status PrecopyWait::read_session(stream::ByteStream& st, const StreamHeader& header, const std::vector<BlockInfo>& blocks) {
    ram_mode_ = header.ram_mode;
    if ((header.features & kFeatureResumable) == 0) return {};
    auto r = read_record(st, blocks, kStreamPageSize);
    if (!r) return r.error();
    if (r->type != RecordType::session) return Error("migration stream: a resumable source's header without its SESSION");
    if (r->window_ms == 0 || r->session == 0) return Error("migration stream: a SESSION with no window or no id");
    session_ = Session{r->session, r->window_ms, header.features};
    arrivals_ = std::make_unique<ArrivalRounds>(blocks);
    announced_ = true;
    return {};
}

void PrecopyWait::listen_also(std::unique_ptr<Listener> more) {
    std::unique_ptr<Listener> replaced;  // goes outside the lock
    std::lock_guard lock(core_.mutex);
    replaced = std::move(also_pending_);
    also_pending_ = std::move(more);
}

Result<std::unique_ptr<Connection>> PrecopyWait::next_connection(std::chrono::steady_clock::time_point deadline) {
    using Clock = std::chrono::steady_clock;
    for (;;) {
        {
            std::unique_ptr<Listener> taken;
            {
                std::lock_guard lock(core_.mutex);
                taken = std::move(also_pending_);
            }
            if (taken) {
                log::info("the precopy's resumption may come on {} too (migrate_recover)", taken->describe());
                also_ = std::move(taken);
            }
        }
        if (!also_) return core_.listener->accept_until(deadline);
        for (Listener* l : {core_.listener.get(), also_.get()}) {
            auto next = l->accept_until(std::min(deadline, Clock::now() + std::chrono::seconds(1)));
            if (next || core_.cancel.cancelled() || Clock::now() >= deadline) return next;
            if (next.error().sys_errno() == ETIMEDOUT) continue;  // its second ended: the other's turn
            if (l == core_.listener.get()) return next;           // the migration's own listener failed
            log::warn("no longer waiting on {}: {}", also_->describe(), next.error().message());  // it goes on
            also_.reset();
            break;
        }
    }
}

Status PrecopyWait::track_arrivals(StreamLoader& loader) {
    if (!session_) return {};
    if (!loader.track_arrivals(arrivals_.get())) {
        return Error("the source's precopy resumes after a broken link, but this side's RAM channel cannot say which "
                     "pages arrived: use the same vmm and plugin release on both sides");
    }
    return {};
}

DestRamChannel* PrecopyWait::channel_of(Connection& conn) const {
    return ram_mode_ == RamMode::transport_channel ? conn.dest_ram() : nullptr;
}

// The new connection's RAM channel checks its own records (multifd's lanes) or delivers the
// sums the loader checks, as the first one did.
Status PrecopyWait::rebind(Connection& conn, StreamLoader& loader, RamVerifier* verifier) {
    DestRamChannel* channel = channel_of(conn);
    bool sums_apart = (session_->features & (kFeatureRoundSums | kFeatureChannelSums)) != 0;
    if (channel != nullptr && verifier != nullptr && !sums_apart) {
        if (auto s = channel->verify_with(verifier); !s) return s;
    }
    return loader.rebind(conn.stream(), channel);
}

Status PrecopyWait::ride_out(std::unique_ptr<Connection>& conn, const Error& why, StreamLoader* loader,
                             RamVerifier* verifier) {
    auto paused_at = std::chrono::steady_clock::now();
    // The source's window, and its last try's wait for an answer.
    auto window = std::chrono::milliseconds(uint64_t{session_->window_ms} + core_.options.params.connect_timeout_ms);
    const char* holding = phase_ == Phase::precopy ? "in precopy: {}; every page that arrived stays"
                          : phase_ == Phase::ready ? "at the switchover, the state loaded and no GO yet: {}; the state stays"
                                                   : "after GO, the guest running here: {}; it runs on";
    log::warn("the link from the source broke {}, and this side waits up to {} ms (the source's x-resume-window) for "
              "the source to resume",
              fmt::format(fmt::runtime(holding), why.message()), window.count());
    {
        std::lock_guard lock(core_.mutex);
        core_.live = nullptr;
        core_.stats.error = why.message();
    }
    if (loader != nullptr) loader->leave_channel();  // before the channel goes with its connection
    // A page whose last copy failed its check did not arrive whole, whatever vouched for its round.
    if (verifier != nullptr && arrivals_) {
        verifier->for_each_owed([this](uint32_t block, uint64_t page) { arrivals_->unarrived(block, page); });
    }
    conn.reset();
    core_.set_status(MigrationStatus::precopy_paused);
    for (;;) {
        auto next = next_connection(paused_at + window);
        if (!next) {
            if (core_.cancel.cancelled()) return next.error();
            if (next.error().sys_errno() != ETIMEDOUT) {
                return next.error().context(fmt::format("the link from the source broke ({}), and waiting for its "
                                                        "resumption failed",
                                                        why.message()));
            }
            return Error(fmt::format("the link from the source broke ({}) and the source did not resume within {} ms "
                                     "(its x-resume-window)",
                                     why.message(), window.count()));
        }
        auto taken = take_resumption(**next);
        if (!taken) return taken.error();
        if (!*taken) continue;
        conn = std::move(*next);
        break;
    }
    if (loader != nullptr) {
        if (auto s = rebind(*conn, *loader, verifier); !s) {
            core_.refuse(conn->stream(), s.error());
            return s;
        }
    }
    {
        std::lock_guard lock(core_.mutex);
        core_.live = conn.get();
        ++core_.stats.precopy_resumes;
        core_.stats.precopy_paused_ms += ms_between(paused_at, std::chrono::steady_clock::now());
        core_.stats.error.clear();
    }
    log::info("precopy resumed from {} after {:.0f} ms", conn->describe(), ms_between(paused_at, std::chrono::steady_clock::now()));
    core_.set_status(MigrationStatus::active);
    return {};
}

// The resuming header and SESSION; HEADER_OK and the rounds in which each page arrived. False:
// a connection that is not this migration's resumption (refused, or broken on the way); the wait
// goes on. An error: the source has ended the migration.
Result<bool> PrecopyWait::take_resumption(Connection& conn) {
    stream::ByteStream& st = conn.stream();
    auto not_it = [&](const Error& e) {
        log::warn("while the precopy waits for its source to resume: {}", e.message());
        return Result<bool>(false);
    };
    if (auto m = read_magic(st); !m) return not_it(m.error());
    auto header = read_header_after_magic(st);
    if (!header) {
        core_.refuse(st, header.error());
        return not_it(header.error());
    }
    StreamHeader local = header_for(core_.machine);
    Status ok = check_compatible(*header, local);
    if (ok && (header->features & kFeaturePrecopyResume) == 0) {
        ok = Error("this destination holds a precopy whose link broke and waits for its source to resume it, not for a "
                   "new migration");
    }
    // Inline (a fallback: tcp: for rdma:), or on a RAM channel as the precopy began.
    if (ok && header->ram_mode == RamMode::transport_channel &&
        (ram_mode_ != RamMode::transport_channel || conn.dest_ram() == nullptr)) {
        ok = Error("the resumption carries RAM on a channel this precopy did not begin with (multifd, rdma): resume with "
                   "the settings the migration began with, or inline");
    }
    auto r = ok ? read_record(st, local.blocks, kStreamPageSize) : Result<Record>(ok.error());
    if (r && r->type != RecordType::session) r = Error("migration stream: a resumption without its SESSION");
    if (r && r->session != session_->id) {
        r = Error("this destination holds the pages of another migration than this source's: it cannot resume here");
    }
    if (!r) {
        core_.refuse(st, r.error());
        return not_it(r.error());
    }
    if (r->window_ms == 0) {
        std::lock_guard lock(core_.mutex);
        return Error(fmt::format("the source ended the migration while its link was broken ({}); its log says why",
                                 core_.stats.error));
    }
    auto answered = [&]() -> Status {
        if (auto s = st.write(encode_header_ok(0)); !s) return s;
        if (phase_ != Phase::precopy) {  // the state loaded, or the guest running: said in one reply
            if (auto s = st.write(encode_reply(phase_ == Phase::ready ? ReplyType::ready : ReplyType::running)); !s) return s;
            return st.flush();
        }
        for (const auto& m : arrivals_->encode())
            if (auto s = st.write(m); !s) return s;
        return st.flush();
    }();
    if (!answered) return not_it(answered.error());
    // The source goes on at once with its next round. A try it gave up on before this side could
    // answer (this side was stopped, or slow) has closed by now: its end is not a resumption.
    uint8_t first = 0;
    auto next = st.await_readable(std::chrono::milliseconds(core_.options.params.connect_timeout_ms));
    if (next) next = st.read_exact(std::span<uint8_t>(&first, 1));
    if (next) next = st.unread(std::span<const uint8_t>(&first, 1));
    if (!next) return not_it(next.error().context("the source's try went before its rounds began"));
    ram_mode_ = header->ram_mode;  // what this connection carries from now on, and how it is summed
    session_->features = header->features;
    return true;
}

void PrecopyWait::cut_at(uint64_t step) {
    if (core_.options.params.switchover_cut != step || cut_done_) return;  // once a migration
    cut_done_ = true;
    std::lock_guard lock(core_.mutex);
    if (core_.live == nullptr) return;
    log::warn("x-switchover-cut {}: cutting the link to the source here, as a failed network would", step);
    (void)core_.live->cut();
}

Status PrecopyWait::load_rounds(std::unique_ptr<Connection>& live, StreamLoader& loader, RamVerifier* verifier) {
    phase_ = Phase::precopy;
    Status loaded = loader.run();
    while (!loaded && session_ && live->link_broke() && !core_.cancel.cancelled()) {
        core_.publish(loader, channel_of(*live), verifier);
        if (loaded = ride_out(live, loaded.error(), &loader, verifier); !loaded) return loaded;  // live is gone
        loaded = loader.run();
    }
    core_.publish(loader, channel_of(*live), verifier);
    if (!loaded) core_.refuse(live->stream(), loaded.error());
    return loaded;
}

Status PrecopyWait::switchover(std::unique_ptr<Connection>& live, StreamLoader& loader, RamVerifier* verifier) {
    for (;;) {
        phase_ = Phase::ready;
        if (live->stream().write(encode_reply(ReplyType::ready))) (void)live->stream().flush();  // a break shows below
        cut_at(2);
        uint8_t first = 0;
        Status next = live->stream().read_exact(std::span<uint8_t>(&first, 1));
        while (!next && live->link_broke() && !core_.cancel.cancelled()) {
            // GO may come on a resumption (it is asked for READY), or the source's rounds.
            if (auto s = ride_out(live, next.error(), &loader, verifier); !s) return s;
            next = live->stream().read_exact(std::span<uint8_t>(&first, 1));
        }
        if (!next) return next.error().context("waiting for the source's go-ahead");
        (void)live->stream().unread(std::span<const uint8_t>(&first, 1));
        if (first == static_cast<uint8_t>(ReplyType::go) || first == static_cast<uint8_t>(ReplyType::go_paused)) break;
        // The source took its guest back before GO (its link broke; the loader reads the new
        // connection since): its rounds go on, and a new STATE.
        if (auto s = load_rounds(live, loader, verifier); !s) return s;
    }
    auto go = read_reply(live->stream());
    if (!go) return go.error().context("waiting for the source's go-ahead");
    if (go->type != ReplyType::go && go->type != ReplyType::go_paused) {
        return Error("the source did not give the go-ahead; not running the guest");
    }
    if (auto s = core_.machine.run().finish_incoming(core_.stay_paused || go->type == ReplyType::go_paused); !s) {
        core_.refuse(live->stream(), s.error());
        return s;
    }
    phase_ = Phase::running;
    cut_at(3);
    if (live->stream().write(encode_reply(ReplyType::running))) (void)live->stream().flush();
    cut_at(4);
    return await_done(live);
}

// The guest runs here. The source's DONE ends the migration; a link that breaks first leaves the
// source asking, and each resumption is told RUNNING, until DONE or the source's window ends.
Status PrecopyWait::await_done(std::unique_ptr<Connection>& live) {
    for (;;) {
        auto done = read_reply(live->stream());
        if (done) {
            if (done->type != ReplyType::done) log::warn("the source answered RUNNING out of turn; the guest runs here");
            return {};
        }
        if (!live->link_broke() || core_.cancel.cancelled()) return {};
        if (auto s = ride_out(live, done.error()); !s) {
            log::warn("the guest runs here, and the source did not confirm it knows ({})", s.error().message());
            return {};
        }
    }
}

}  // namespace vmm::migration

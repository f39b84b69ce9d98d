#include "vmm/migration/session/destination.h"

#include <fmt/format.h>

#include <algorithm>

#include "vmm/common/elapsed.h"
#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"
#include "vmm/migration/postcopy/receiver.h"
#include "vmm/migration/precopy/machine_state.h"
#include "vmm/migration/precopy/ram_loader.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

IncomingMigration::IncomingMigration(machine::Machine& m, Transport& transport, Uri uri, SettingsFn settings,
                                     stream::CancelToken cancel, bool stay_paused, StatusFn on_status, FailFn on_failure)
    : core_(m, std::move(uri), settings(), std::move(cancel), stay_paused, std::move(on_status), std::move(on_failure)),
      transport_(transport), settings_(std::move(settings)) {}

IncomingMigration::~IncomingMigration() {
    cancel();
    if (thread_.joinable()) thread_.join();
}

void IncomingMigration::cancel() {
    std::lock_guard lock(core_.mutex);
    core_.cancel.cancel();
    if (recovery_cancel_) recovery_cancel_->cancel();
}

Status IncomingMigration::listen() {
    auto l = transport_.listen(context_for(core_.machine, core_.uri, settings_, core_.cancel));
    if (!l) return l.error();
    core_.listener = std::move(*l);
    core_.machine.run().set_incoming();
    return {};
}

void IncomingMigration::start() { thread_ = std::thread([this] { run(); }); }

MigrationStats IncomingMigration::stats() const {
    std::lock_guard lock(core_.mutex);
    MigrationStats s = core_.stats;
    if (core_.live != nullptr && s.setup_parts.empty()) {  // the first connection's (a recovery's is not setup)
        s.setup_parts = setup_parts_of(*core_.live);
        s.setup_time_ms = static_cast<uint64_t>(total_ms(s.setup_parts));
    }
    bool lazy = file_.report(s);
    if (receiver_ || lazy) {
        if (receiver_) s.postcopy = receiver_->stats();
        s.ram.remaining = (s.postcopy.missing_pages - s.postcopy.placed) * memory::kPageSize;
        s.ram.transferred += s.postcopy.postcopy_bytes;  // what arrived, both phases (as the source counts it)
    }
    return s;
}

std::vector<SetupPart> IncomingMigration::setup_parts_of(const Connection& conn) const {
    std::vector<SetupPart> steps = conn.setup_parts();
    size_t n = std::min(accept_steps_, steps.size());
    std::vector<SetupPart> accepted(steps.begin(), steps.begin() + static_cast<long>(n));
    std::vector<SetupPart> later(steps.begin() + static_cast<long>(n), steps.end());
    std::vector<SetupPart> parts;
    if (!accepted.empty()) parts.push_back({"accept", total_ms(accepted), std::move(accepted)});
    parts.push_back({"header", header_ms_, {}});
    if (!later.empty()) parts.push_back({"ram-setup", total_ms(later), std::move(later)});
    return parts;
}

bool IncomingMigration::waits_with_settings_taken() const {
    std::lock_guard lock(core_.mutex);
    return core_.stats.status == MigrationStatus::none && core_.live == nullptr && !transport_.listener_reads_settings_late();
}

bool IncomingMigration::waits_without_tls() const {
    std::lock_guard lock(core_.mutex);
    return core_.stats.status == MigrationStatus::none && core_.live == nullptr && !transport_.carries_tls();
}
void IncomingMigration::run() {
    name_this_thread("mig-incoming");
    log::info("waiting for an incoming migration on {}", core_.listener->describe());
    // The hand-over the header's answer reports, rehearsed while nobody waits for it: this
    // machine's state is what it will be when the source connects (nothing runs here yet).
    rehearsal_ = rehearse_handover(core_.machine);
    auto conn = core_.listener->accept();
    if (!conn) {
        if (!core_.cancel.cancelled()) core_.on_failure(conn.error());
        return;
    }
    log::info("incoming migration from {}", (*conn)->describe());
    core_.options = settings_();  // as the monitor has them now, changes made while this waited included
    core_.start = std::chrono::steady_clock::now();
    core_.set_status(MigrationStatus::active);
    {
        std::lock_guard lock(core_.mutex);
        core_.live = conn->get();
        accept_steps_ = core_.live->setup_parts().size();
    }
    Status s = receive(*conn);
    end_connection(s, std::move(*conn));
}

void IncomingMigration::end_connection(Status s, std::unique_ptr<Connection> conn) {
    if (!s && conn) conn->abort(s.error().message());  // a peer that is still there hears why at once
    if (receiver_) receiver_->detach();  // the stream goes with the connection
    // Done with the source: the connection goes, then the listener (a transport's connection may
    // use what its listener set up), so the port is free for the next migration to this host.
    {
        std::lock_guard lock(core_.mutex);
        if (conn && core_.stats.setup_parts.empty()) {
            core_.stats.setup_parts = setup_parts_of(*conn);
            core_.stats.setup_time_ms = static_cast<uint64_t>(total_ms(core_.stats.setup_parts));
        }
        core_.live = nullptr;
    }
    conn.reset();
    core_.listener.reset();
    {
        std::lock_guard lock(core_.mutex);
        core_.stats.total_time_ms = static_cast<uint64_t>(ms_since(core_.start));
        core_.stats.error = s ? "" : s.error().message();
    }
    if (!s && in_postcopy_) {
        // The guest runs here, and the source holds the pages it still lacks: ending now would
        // lose it. Its vCPUs wait on those pages; the source keeps its copy paused.
        PostcopyStats left = receiver_->stats();
        log::error("postcopy from the source broke: {}; the guest stays here, its vCPUs waiting for {} missing pages: "
                   "'migrate_recover URI' here, then 'migrate -r URI' on the source, resumes it",
                   s.error().message(), left.missing_pages - left.placed);
        core_.set_status(MigrationStatus::postcopy_paused);
        return;
    }
    core_.set_status(s ? MigrationStatus::completed : MigrationStatus::failed);
    if (!s) core_.on_failure(s.error());
}

// As 'migrate_recover URI' while it runs, set before: a fabric that fails can hand the rest of
// the precopy to another way (the source's x-fallback-uri). Not listening there is said and
// harms nothing: the resumption may still come where the migration began.
void IncomingMigration::listen_on_fallback() {
    const std::string& text = core_.options.params.fallback_uri;
    if (text.empty() || !find_transport_) return;
    if (!precopy_wait_.announced()) {
        log::warn("x-fallback-uri {} is not used: this migration does not resume after a broken link (the source's "
                  "x-resume-window is 0)",
                  text);
        return;
    }
    auto listener = [&]() -> Result<std::unique_ptr<Listener>> {
        auto uri = parse_uri(text);
        if (!uri) return uri.error();
        auto t = find_transport_(uri->scheme);
        if (!t) return t.error();
        if (!(*t)->has_peer()) return Error(fmt::format("{}: is no way for a source to come", uri->scheme));
        return (*t)->listen(context_for(core_.machine, *uri, settings_, core_.cancel));
    }();
    if (!listener) {
        log::warn("x-fallback-uri {}: not listening there ({}); a resumption of this precopy comes only on {}", text,
                  listener.error().message(), core_.uri.text);
        return;
    }
    log::info("a resumption of this precopy is taken on {} too (x-fallback-uri)", text);
    precopy_wait_.listen_also(std::move(*listener));
}

Status IncomingMigration::recover(Transport& transport, Uri uri) {
    auto st = stats().status;
    if ((st == MigrationStatus::active || st == MigrationStatus::precopy_paused) && precopy_wait_.announced()) {
        // A resumable precopy: its resumption may come there too, beside where it began.
        auto l = transport.listen(context_for(core_.machine, uri, settings_, core_.cancel));
        if (!l) return l.error();
        log::info("migrate_recover: a resumption of this precopy is taken on {} too", uri.text);
        precopy_wait_.listen_also(std::move(*l));
        return {};
    }
    if (st == MigrationStatus::postcopy_recover) {
        if (auto s = stop_waiting(); !s) return s;
    } else if (st != MigrationStatus::postcopy_paused) {
        return Error(fmt::format("migrate_recover is for an incoming postcopy whose link broke (postcopy-paused), or a "
                                 "precopy that resumes after one (its source's x-resume-window); this one is {}{}",
                                 to_string(st), st == MigrationStatus::active ? " and does not resume" : ""));
    }
    if (thread_.joinable()) thread_.join();  // the last link's thread has ended: its last act was the status
    auto token = stream::CancelToken::create();
    if (!token) return token.error();
    {
        std::lock_guard lock(core_.mutex);
        if (core_.cancel.cancelled()) return Error("migrate_recover: this vmm is quitting");
        recovery_cancel_.emplace(std::move(*token));
    }
    auto l = transport.listen(context_for(core_.machine, uri, settings_, *recovery_cancel_));
    if (!l) return l.error();
    core_.listener = std::move(*l);
    core_.set_status(MigrationStatus::postcopy_recover);
    thread_ = std::thread([this] { run_recovery(); });
    return {};
}

Status IncomingMigration::stop_waiting() {
    std::lock_guard lock(core_.mutex);
    if (core_.live != nullptr) {
        return Error("migrate_recover: the source is resuming this postcopy already; wait for it to end "
                     "(postcopy-active, or postcopy-paused to try again)");
    }
    recovery_cancel_->cancel();  // run_recovery's accept returns, and the status goes back to paused
    return {};
}

Status IncomingMigration::pause_link() {
    std::lock_guard lock(core_.mutex);
    if (core_.stats.status != MigrationStatus::postcopy_active || core_.live == nullptr) {
        return Error(fmt::format("migrate_pause pauses a migration in postcopy-active; this one is {}",
                                 to_string(core_.stats.status)));
    }
    return core_.live->cut();
}

void IncomingMigration::run_recovery() {
    name_this_thread("mig-incoming");
    log::info("waiting for the source to resume postcopy ('migrate -r') on {}", core_.listener->describe());
    auto conn = core_.listener->accept();
    bool superseded = false;
    {
        std::lock_guard lock(core_.mutex);
        superseded = recovery_cancel_->cancelled() && !core_.cancel.cancelled();
        if (conn && !superseded) core_.live = conn->get();
    }
    if (superseded) {  // a new migrate_recover listens elsewhere
        log::info("migrate_recover: no longer waiting on {}", core_.listener->describe());
        if (conn) (*conn)->abort("the destination listens elsewhere now (a new migrate_recover)");
        core_.listener.reset();
        core_.set_status(MigrationStatus::postcopy_paused);
        return;
    }
    if (!conn) {
        end_connection(conn.error(), nullptr);
        return;
    }
    Status s = resume(**conn);
    end_connection(s, std::move(*conn));
}

// The source's resuming header, HEADER_OK, the pages held here, then postcopy carries on.
Status IncomingMigration::resume(Connection& conn) {
    stream::ByteStream& st = conn.stream();
    if (auto m = read_magic(st); !m) return m.error();
    auto header = read_header_after_magic(st);
    if (!header) {
        core_.refuse(st, header.error());
        return header.error();
    }
    Status ok = check_compatible(*header, header_for(core_.machine));
    if (ok && (header->features & kFeaturePostcopyResume) == 0) {
        ok = Error("this destination waits for its paused postcopy to resume, not for a new migration: 'migrate -r URI' "
                   "on the source resumes it");
    }
    if (!ok) {
        core_.refuse(st, ok.error());
        return ok;
    }
    if (auto s = st.write(encode_header_ok(0)); !s) return s;
    auto link = conn.dest_postcopy({header->blocks, (header->features & kFeatureVerifyRam) != 0});
    if (auto s = receiver_->resume(st, std::move(link), std::chrono::milliseconds(core_.options.params.io_timeout_ms)); !s)
        return s;
    log::info("postcopy resumed from {}", conn.describe());
    core_.set_status(MigrationStatus::postcopy_active);
    Status s = receiver_->run();
    if (s) {
        receiver_->close();
        core_.machine.control().postcopy_window(false);
        core_.machine.run().set_incomplete("");
    }
    return s;
}

// Reads the header, checks it against this machine, rehearses the hand-over and answers.
Result<StreamHeader> IncomingMigration::accept_header(Connection& conn) {
    stream::ByteStream& st = conn.stream();
    if (auto m = read_magic(st); !m) return m.error();  // not a vmm source: it could not read REFUSED
    auto header = read_header_after_magic(st);
    if (!header) {
        core_.refuse(st, header.error());
        return header.error();
    }
    StreamHeader local = header_for(core_.machine);
    Status ok = check_compatible(*header, local);
    if (ok && header->ram_mode == RamMode::transport_channel && conn.dest_ram() == nullptr) {
        ok = Error("the source sends RAM through a transport channel this transport lacks");
    }
    if (ok && (header->features & kFeaturePostcopyResume) != 0) {
        ok = Error("the source resumes a paused postcopy, but this destination has none: 'migrate -r' goes to the vmm "
                   "that runs the guest, after its 'migrate_recover URI'");
    }
    if (ok && (header->features & kFeaturePrecopyResume) != 0) {
        ok = Error("the source resumes a precopy whose link broke, but this destination has none (a vmm that was "
                   "restarted, or another one): the migration must start again");
    }
    if (ok) ok = precopy_wait_.read_session(st, *header, local.blocks);
    if (ok && conn.preempt_stream() != nullptr && !core_.options.caps.postcopy_preempt) {
        ok = Error("the source has postcopy-preempt on, this destination does not: set it on both sides "
                   "(migrate_set_capability postcopy-preempt on, before migrate_incoming), or off on the source");
    }
    if (ok && conn.preempt_stream() == nullptr && !conn.postcopy_channel() && core_.options.caps.postcopy_preempt &&
        (header->features & kFeaturePostcopy) != 0) {
        ok = Error("this destination has postcopy-preempt on, the source does not: set it on both sides, or off here");
    }
    if (ok && (header->features & kFeaturePostcopy) != 0 && !core_.options.caps.postcopy_ram) {
        ok = Error("the source has postcopy-ram on, this destination does not: set it on both sides "
                   "(migrate_set_capability postcopy-ram on, before migrate_incoming), or off on the source");
    }
    auto handover_us = !ok ? Result<uint32_t>(ok.error()) : rehearsal_ ? std::move(*rehearsal_) : rehearse_handover(core_.machine);
    rehearsal_.reset();  // a recovery's connection rehearses again
    if (!handover_us) {
        core_.refuse(st, handover_us.error());
        return handover_us.error();
    }
    if (auto s = st.write(encode_header_ok(*handover_us)); !s) return s.error();
    if (auto s = st.flush(); !s) return s.error();
    {
        std::lock_guard lock(core_.mutex);
        header_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - core_.start).count();  // since accepted
    }
    header->blocks = local.blocks;
    return header;
}
// How the source's sums are made: on an authenticated connection keyed MACs, and then they must
// come with every page (a source that sends none is refused: nothing would vouch for the RAM).
Result<PageSummer> IncomingMigration::sums_for(Connection& conn, DestRamChannel* channel, bool channel_sums) {
    auto key = conn.sums_key();
    if (!key) return key.error();
    if (!*key) return PageSummer();
    if (channel == nullptr || !channel_sums) {
        return Error(fmt::format("{} is authenticated, but the source sends its RAM without sums to authenticate it by",
                                 conn.describe()));
    }
    return PageSummer(**key);
}

Status IncomingMigration::receive(std::unique_ptr<Connection>& live) {
    Connection& conn = *live;
    stream::ByteStream& st = conn.stream();
    auto header = accept_header(conn);
    if (!header) return header.error();
    listen_on_fallback();
    DestRamChannel* channel = header->ram_mode == RamMode::transport_channel ? conn.dest_ram() : nullptr;
    std::unique_ptr<RamVerifier> verifier;
    bool round_sums = (header->features & kFeatureRoundSums) != 0;
    bool channel_sums = (header->features & kFeatureChannelSums) != 0;
    auto summer = sums_for(conn, channel, channel_sums);
    if (!summer) {
        core_.refuse(st, summer.error());
        return summer.error();
    }
    if ((header->features & kFeatureVerifyRam) != 0) {
        verifier = std::make_unique<RamVerifier>(header->blocks, *summer);
        if (channel != nullptr && !round_sums && !channel_sums) {  // a channel that checks its own records (multifd)
            if (auto s = channel->verify_with(verifier.get()); !s) {
                core_.refuse(st, s.error());
                return s;
            }
        }
    }
    StreamLoader loader(core_.machine.memory(), st, channel, header->blocks,
                        [this](std::span<const uint8_t> blob) { return load_machine_state(core_.machine, blob); },
                        verifier.get());
    if (verifier && round_sums) loader.expect_round_sums();
    if ((header->features & kFeatureRoundLanded) != 0) loader.answer_landed_rounds();
    if ((header->features & kFeaturePostcopy) != 0) loader.allow_postcopy();
    if (verifier && channel_sums) {
        if (auto s = loader.check_channel_sums(); !s) {
            core_.refuse(st, s.error());
            return s;
        }
    }
    if (auto s = precopy_wait_.track_arrivals(loader); !s) {
        core_.refuse(st, s.error());
        return s;
    }
    if (auto s = precopy_wait_.load_rounds(live, loader, verifier.get()); !s) return s;
    // A resumable precopy's own switchover (never a file's); one that switched to postcopy goes
    // on as any postcopy, over the connection it resumed on, its RAM carried as that one carries it.
    if (precopy_wait_.resumable() && !loader.switched_to_postcopy()) return precopy_wait_.switchover(live, loader, verifier.get());
    header->ram_mode = precopy_wait_.ram_mode();
    return finish(*live, *header, loader, precopy_wait_.channel_of(*live));
}

Status IncomingMigration::finish(Connection& conn, const StreamHeader& header, StreamLoader& loader,
                                 DestRamChannel* channel) {
    stream::ByteStream& st = conn.stream();
    if (loader.switched_to_postcopy()) {
        loader.stop_populating();  // before userfaultfd registers guest RAM
        return receive_postcopy(conn, header, loader.discards());
    }
    FileRamSource* file = channel != nullptr ? channel->file_ram() : nullptr;
    if (auto lazy = file != nullptr ? file->lazy() : std::nullopt) {
        loader.stop_populating();  // before userfaultfd registers guest RAM
        return file_.receive_lazy(st, header.blocks, std::move(*lazy), [&] { return ready_and_go(st); });
    }
    if (auto mapped = file != nullptr ? file->mapped() : std::nullopt) {
        if (auto s = file_.map(std::move(*mapped)); !s) {
            core_.refuse(st, s.error());
            return s;
        }
    }
    return ready_and_go(st);
}
// READY, then the source's GO; the guest runs here from now on (or stays paused as the source
// had it, or with -S: 'cont' runs it).
Status IncomingMigration::ready_and_go(stream::ByteStream& st, PostcopyReceiver* postcopy) {
    auto ready = encode_reply(ReplyType::ready);
    if (postcopy != nullptr) {  // its fault thread may be writing a request
        if (auto s = postcopy->send(ready); !s) return s;
    } else {
        if (auto s = st.write(ready); !s) return s;
        if (auto s = st.flush(); !s) return s;
    }
    auto go = read_reply(st);
    if (!go) return go.error().context("waiting for the source's go-ahead");
    if (go->type != ReplyType::go && go->type != ReplyType::go_paused) {
        return Error("the source did not give the go-ahead; not running the guest");
    }
    return core_.machine.run().finish_incoming(core_.stay_paused || go->type == ReplyType::go_paused);
}

// The guest runs here before every page has come: userfaultfd holds the missing ones, the
// fault thread asks for them, and the stream brings the rest.
Status IncomingMigration::receive_postcopy(Connection& conn, const StreamHeader& header,
                                           const std::vector<Record>& discards) {
    stream::ByteStream& st = conn.stream();
    if (header.ram_mode == RamMode::transport_channel && !conn.carries_postcopy()) {
        Error e("the source switched to postcopy, but this transport has no postcopy channel with it");
        core_.refuse(st, e);
        return e;
    }
    bool verify = (header.features & kFeatureVerifyRam) != 0;
    auto receiver = std::make_unique<PostcopyReceiver>(core_.machine.memory(), st, conn.dest_postcopy({header.blocks, verify}),
                                                       header.blocks, core_.machine.vcpus().tids(), verify,
                                                       std::chrono::milliseconds(core_.options.params.io_timeout_ms));
    if (auto s = receiver->prepare(discards); !s) {
        core_.refuse(st, s.error());
        return s;
    }
    PostcopyReceiver* r = receiver.get();
    {
        std::lock_guard lock(core_.mutex);
        receiver_ = std::move(receiver);  // kept for its figures, and for the pages it holds
    }
    core_.machine.control().postcopy_window(true);  // the guest's own view of its stalls from here
    if (auto s = ready_and_go(st, r); !s) {
        core_.machine.control().postcopy_window(false);
        return s;
    }
    in_postcopy_ = true;
    core_.machine.run().set_incomplete("the guest runs here in postcopy and still lacks pages only the source has");
    core_.set_status(MigrationStatus::postcopy_active);
    Status s = r->run();
    if (s) {
        r->close();  // every page is here: the guest no longer needs the fault thread
        core_.machine.control().postcopy_window(false);
        core_.machine.run().set_incomplete("");
    }
    return s;
}

}  // namespace vmm::migration

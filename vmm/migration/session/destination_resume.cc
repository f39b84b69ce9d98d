// IncomingMigration's precopy across a broken link (destination.h): the SESSION a resumable
// source announces, precopy-paused while it reconnects, and the check of its new connection.
#include <fmt/format.h>

#include "vmm/common/elapsed.h"
#include "vmm/common/log.h"
#include "vmm/migration/precopy/machine_state.h"
#include "vmm/migration/session/destination.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

namespace {
void refuse_quietly(stream::ByteStream& st, const std::string& why) {
    if (st.write(encode_reply(ReplyType::refused, why))) (void)st.flush();
}
}  // namespace

Status IncomingMigration::read_session(stream::ByteStream& st, uint32_t features, const std::vector<BlockInfo>& blocks) {
    if ((features & kFeatureResumable) == 0) return {};
    auto r = read_record(st, blocks, kStreamPageSize);
    if (!r) return r.error();
    if (r->type != RecordType::session) return Error("migration stream: a resumable source's header without its SESSION");
    if (r->window_ms == 0 || r->session == 0) return Error("migration stream: a SESSION with no window or no id");
    session_ = Session{r->session, r->window_ms};
    arrivals_ = std::make_unique<ArrivalRounds>(blocks);
    return {};
}

Status IncomingMigration::ride_out(std::unique_ptr<Connection>& conn, const Error& why) {
    auto paused_at = std::chrono::steady_clock::now();
    // The source's window, and its last try's wait for an answer.
    auto window = std::chrono::milliseconds(uint64_t{session_->window_ms} + options_.params.connect_timeout_ms);
    log::warn("the link from the source broke in precopy: {}; every page that arrived stays, and this side waits up to {} "
              "ms (the source's x-resume-window) for it to resume",
              why.message(), window.count());
    {
        std::lock_guard lock(mutex_);
        live_ = nullptr;
        stats_.error = why.message();
    }
    conn.reset();
    set_status(MigrationStatus::precopy_paused);
    for (;;) {
        auto next = listener_->accept_until(paused_at + window);
        if (!next) {
            if (cancel_.cancelled()) return next.error();
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
    {
        std::lock_guard lock(mutex_);
        live_ = conn.get();
        ++stats_.precopy_resumes;
        stats_.precopy_paused_ms += ms_between(paused_at, std::chrono::steady_clock::now());
        stats_.error.clear();
    }
    log::info("precopy resumed from {} after {:.0f} ms", conn->describe(), ms_between(paused_at, std::chrono::steady_clock::now()));
    set_status(MigrationStatus::active);
    return {};
}

// The resuming header and SESSION; HEADER_OK and the rounds in which each page arrived. False:
// a connection that is not this migration's resumption (refused, or broken on the way); the wait
// goes on. An error: the source has ended the migration.
Result<bool> IncomingMigration::take_resumption(Connection& conn) {
    stream::ByteStream& st = conn.stream();
    auto not_it = [&](const Error& e) {
        log::warn("while the precopy waits for its source to resume: {}", e.message());
        return Result<bool>(false);
    };
    if (auto m = read_magic(st); !m) return not_it(m.error());
    auto header = read_header_after_magic(st);
    if (!header) {
        refuse_quietly(st, header.error().message());
        return not_it(header.error());
    }
    StreamHeader local = header_for(machine_);
    Status ok = check_compatible(*header, local);
    if (ok && (header->features & kFeaturePrecopyResume) == 0) {
        ok = Error("this destination holds a precopy whose link broke and waits for its source to resume it, not for a "
                   "new migration");
    }
    auto r = ok ? read_record(st, local.blocks, kStreamPageSize) : Result<Record>(ok.error());
    if (r && r->type != RecordType::session) r = Error("migration stream: a resumption without its SESSION");
    if (r && r->session != session_->id) {
        r = Error("this destination holds the pages of another migration than this source's: it cannot resume here");
    }
    if (!r) {
        refuse_quietly(st, r.error().message());
        return not_it(r.error());
    }
    if (r->window_ms == 0) {
        return Error(fmt::format("the source ended the migration while its link was broken ({}); its log says why",
                                 stats().error));
    }
    auto answered = [&]() -> Status {
        if (auto s = st.write(encode_header_ok(0)); !s) return s;
        for (const auto& m : arrivals_->encode())
            if (auto s = st.write(m); !s) return s;
        return st.flush();
    }();
    if (!answered) return not_it(answered.error());
    // The source goes on at once with its next round. A try it gave up on before this side could
    // answer (this side was stopped, or slow) has closed by now: its end is not a resumption.
    uint8_t first = 0;
    auto next = st.await_readable(std::chrono::milliseconds(options_.params.connect_timeout_ms));
    if (next) next = st.read_exact(std::span<uint8_t>(&first, 1));
    if (next) next = st.unread(std::span<const uint8_t>(&first, 1));
    if (!next) return not_it(next.error().context("the source's try went before its rounds began"));
    return true;
}

}  // namespace vmm::migration

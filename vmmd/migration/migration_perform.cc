// The source's part of a migration: Perform3 turns libvirt's flags and typed parameters into
// vmm's capabilities and parameters, runs vmm's migration and waits for its end.
#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <thread>

#include "vmm/common/log.h"
#include "vmmd/domain/domain_args.h"
#include "vmmd/migration/migrations.h"
#include "vmmd/migration/pin_limit.h"
#include "vmmd/peer/peer_migration.h"

namespace vmmd {

using rpc::Reply;
using vmm::Error;
using vmm::monitor::Json;
using xdr::Reader;
using xdr::Writer;

namespace {

constexpr uint32_t kServedFlags = VIR_MIGRATE_LIVE | VIR_MIGRATE_PERSIST_DEST | VIR_MIGRATE_UNDEFINE_SOURCE |
                                  VIR_MIGRATE_PAUSED | VIR_MIGRATE_NON_SHARED_DISK | VIR_MIGRATE_NON_SHARED_INC |
                                  VIR_MIGRATE_CHANGE_PROTECTION | VIR_MIGRATE_UNSAFE | VIR_MIGRATE_ABORT_ON_ERROR |
                                  VIR_MIGRATE_AUTO_CONVERGE | VIR_MIGRATE_RDMA_PIN_ALL | VIR_MIGRATE_PARALLEL |
                                  VIR_MIGRATE_PEER2PEER | VIR_MIGRATE_POSTCOPY | VIR_MIGRATE_POSTCOPY_RESUME |
                                  VIR_MIGRATE_TLS;

// Why a flag the vmm driver does not serve is refused (nullopt: every flag is served).
std::optional<std::string> unserved(uint32_t flags) {
    struct Named {
        uint32_t flag;
        const char* why;
    } names[] = {
        {VIR_MIGRATE_TUNNELLED, "--tunnelled: vmm migrates over its own connection, not through libvirt's"},
        {VIR_MIGRATE_OFFLINE, "--offline: define the domain on the destination instead"},
        {VIR_MIGRATE_COMPRESSED, "--compressed: vmm does not compress migration data"},
    };
    for (const Named& n : names)
        if ((flags & n.flag) != 0) return n.why;
    if ((flags & ~kServedFlags) != 0) return fmt::format("migration flags {:#x} are not served by the vmm driver", flags & ~kServedFlags);
    return std::nullopt;
}

}  // namespace
Reply Migrations::perform(const DomainView& v, Reader& a) {
    auto dconnuri = a.optional_string(rpc::kMaxString);
    auto params = rpc::decode_typed_params(a);
    auto cookie_bytes = a.opaque(kMaxCookie);
    auto flags = a.u32();
    if (!dconnuri || !params || !cookie_bytes || !flags) return undecodable("DOMAIN_MIGRATE_PERFORM3_PARAMS");
    if (auto why = unserved(*flags)) return rpc::fail(VIR_ERR_ARGUMENT_UNSUPPORTED, *why);
    if (auto why = driver_.tls_refusal(*flags)) return rpc::fail(VIR_ERR_ARGUMENT_UNSUPPORTED, *why);
    if (auto cookie = decode_cookie(*cookie_bytes); !cookie) return rpc::fail(VIR_ERR_INVALID_ARG, cookie.error().message());
    if (!v.active()) return not_running(v);
    if ((*flags & VIR_MIGRATE_PEER2PEER) != 0) return perform_p2p(v, *dconnuri, *params, *flags);
    auto uri_text = rpc::string_param(*params, VIR_MIGRATE_PARAM_URI);
    if (!uri_text || !*uri_text) return rpc::fail(VIR_ERR_INVALID_ARG, "DOMAIN_MIGRATE_PERFORM3_PARAMS: no migrate_uri");
    auto uri = parse_migration_uri(**uri_text);
    if (!uri) return rpc::fail(VIR_ERR_INVALID_ARG, uri.error().message());
    if (uri->port == 0) return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("migration URI '{}' has no port", **uri_text));
    bool resume = (*flags & VIR_MIGRATE_POSTCOPY_RESUME) != 0;
    auto done = resume ? recovery_.perform(v, *uri, *params) : driver_.run_outgoing(v, *uri, *flags, *params);
    if (!done && driver_.in_postcopy(v.def.uuid)) {
        recovery_.failed_here(v.def.uuid);  // the guest is split: kept for --postcopy-resume
        return rpc::fail(VIR_ERR_OPERATION_FAILED, done.error().message());
    }
    Job job = jobs_.get(v.def.uuid);
    job.active = job.postcopy && done;  // in postcopy the job goes on until Confirm
    if (!done) {
        sup_.set_phase(v.def.uuid, MigrationPhase::none);  // the vmm keeps the guest through a failure
        jobs_.set(v.def.uuid, job);
        vmm::log::warn("vmmd: domain '{}': its migration failed (Perform): {}; the guest runs on here", v.def.name,
                       done.error().message());
        return rpc::fail(VIR_ERR_OPERATION_FAILED, done.error().message());
    }
    job.completed = *done;
    jobs_.set(v.def.uuid, job);
    auto reason = job.postcopy ? VIR_DOMAIN_PAUSED_POSTCOPY : VIR_DOMAIN_PAUSED_MIGRATION;
    auto event = job.postcopy ? VIR_DOMAIN_EVENT_SUSPENDED_POSTCOPY : VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED;
    bool announce = !job.paused_for_it && !resume;  // a resumed source was paused already
    sup_.set_state(v.def.uuid, {VIR_DOMAIN_PAUSED, reason},
                   announce ? std::optional(LifecycleEvent{VIR_DOMAIN_EVENT_SUSPENDED, event}) : std::nullopt);
    // Recorded before the answer goes: from here the destination may run the guest.
    sup_.set_phase(v.def.uuid, MigrationPhase::outgoing_done);
    vmm::log::info("vmmd: domain '{}': {} (Perform): held paused here until the client's Confirm", v.def.name,
                   job.postcopy ? "switched to postcopy" : "migrated");
    Writer w;
    w.opaque(encode_cookie({hostname_, v.def.name, v.def.uuid, *done}));
    return rpc::ok(std::move(w));
}

Reply Migrations::perform_p2p(const DomainView& v, const std::optional<std::string>& dconnuri,
                              const std::vector<rpc::TypedParam>& params, uint32_t flags) {
    if (!dconnuri || dconnuri->empty()) return rpc::fail(VIR_ERR_INVALID_ARG, "--p2p needs the destination's URI");
    // Each step comes back to this vmmd's own procedures (Begin3, Perform3 without --p2p,
    // Confirm3) on a connection of its own, and goes to the destination's (Prepare3, Finish3);
    // Begin3 refuses a domain that is migrating already.
    auto done = peer::migrate({self_uri_, *dconnuri, format_uuid(v.def.uuid), params, flags});
    if (!done) return rpc::fail(VIR_ERR_OPERATION_FAILED, done.error().message());
    Writer w;
    w.opaque({});  // no cookie: Confirm3 already ran
    return rpc::ok(std::move(w));
}

}  // namespace vmmd

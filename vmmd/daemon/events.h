// EventHub: libvirt's domain events for the clients that asked (virsh event, libvirt-python's
// domainEventRegisterAny). A client registers with CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY
// (one event kind, all domains or one) and gets a callback id; each event is then sent to it as a
// message (type MESSAGE, not a reply) carrying that id. Registrations end with
// CONNECT_DOMAIN_EVENT_CALLBACK_DEREGISTER_ANY or with the connection.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "vmmd/daemon/callback_registry.h"
#include "vmmd/server/outbox.h"
#include "vmmd/domain/domain_def.h"
#include "vmmd/rpc/dispatch.h"
#include "vmmd/rpc/typed_params.h"
#include "vmmd/runtime/supervisor.h"

namespace vmmd {

class EventHub {
public:
    // The server tells the hub about each connection, so that events can reach it.
    void connected(uint64_t connection, std::shared_ptr<Outbox> outbox);
    void disconnected(uint64_t connection);

    // A lifecycle event (VIR_DOMAIN_EVENT_ID_LIFECYCLE) of `def`, running as `id` (-1: not running).
    void lifecycle(const DomainDef& def, int id, LifecycleEvent e);
    // An outgoing migration's memory iteration (VIR_DOMAIN_EVENT_ID_MIGRATION_ITERATION, QEMU's
    // MIGRATION_PASS): `iteration` dirty-bitmap syncs so far, 2 once the first pass has ended
    // (virsh migrate --postcopy-after-precopy switches to postcopy then).
    void migration_iteration(const DomainDef& def, int id, int iteration);
    // A job ended and succeeded (VIR_DOMAIN_EVENT_ID_JOB_COMPLETED): its statistics, as
    // 'domjobinfo --completed' gives them (virsh event --event job-completed prints them).
    void job_completed(const DomainDef& def, int id, const std::vector<rpc::TypedParam>& stats);

    // The register and deregister procedures.
    std::vector<rpc::Procedure> procedures();

    static constexpr size_t kMaxCallbacksPerConnection = 1024;

private:
    struct Callback {
        int32_t id = 0;
        int32_t event_id = 0;
        std::optional<Uuid> domain;  // nullopt: every domain
    };
    rpc::Reply register_any(rpc::Caller& caller, xdr::Reader& args);
    // Sends event message `proc` to every callback for `event_id` on `domain`: each body is the
    // callback's id followed by `body`.
    void send(int32_t event_id, const Uuid& domain, rpc::Proc proc, const std::vector<uint8_t>& body);
    rpc::Reply deregister_any(rpc::Caller& caller, xdr::Reader& args);

    CallbackRegistry<Callback> callbacks_{kMaxCallbacksPerConnection};
};

}  // namespace vmmd

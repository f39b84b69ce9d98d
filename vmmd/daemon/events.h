// EventHub: libvirt's domain events for the clients that asked (virsh event, libvirt-python's
// domainEventRegisterAny). A client registers with CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY
// (one event kind, all domains or one) and gets a callback id; each event is then sent to it as a
// message (type MESSAGE, not a reply) carrying that id. Registrations end with
// CONNECT_DOMAIN_EVENT_CALLBACK_DEREGISTER_ANY or with the connection.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "vmmd/daemon/outbox.h"
#include "vmmd/domain/domain_def.h"
#include "vmmd/rpc/dispatch.h"
#include "vmmd/runtime/supervisor.h"

namespace vmmd {

class EventHub {
public:
    // The server tells the hub about each connection, so that events can reach it.
    void connected(uint64_t connection, std::shared_ptr<Outbox> outbox);
    void disconnected(uint64_t connection);

    // A lifecycle event (VIR_DOMAIN_EVENT_ID_LIFECYCLE) of `def`, running as `id` (-1: not running).
    void lifecycle(const DomainDef& def, int id, LifecycleEvent e);

    // The register and deregister procedures.
    std::vector<rpc::Procedure> procedures();

    static constexpr size_t kMaxCallbacksPerConnection = 1024;

private:
    struct Callback {
        int32_t id = 0;
        int32_t event_id = 0;
        std::optional<Uuid> domain;  // nullopt: every domain
    };
    struct Connection {
        std::shared_ptr<Outbox> outbox;
        std::vector<Callback> callbacks;
    };
    rpc::Reply register_any(rpc::Caller& caller, xdr::Reader& args);
    rpc::Reply deregister_any(rpc::Caller& caller, xdr::Reader& args);

    std::mutex mutex_;
    std::map<uint64_t, Connection> connections_;
    int32_t next_callback_ = 1;
};

}  // namespace vmmd

// MonitorEventHub: the QMP events of the domains' vmm, relayed to libvirt clients as libvirt's
// QEMU driver relays QEMU's (`virsh qemu-monitor-event`, libvirt-qemu's
// virConnectDomainQemuMonitorEventRegister). A client registers with the QEMU program's
// CONNECT_DOMAIN_MONITOR_EVENT_REGISTER (4): one domain or all, one event name or all (matched
// exactly, without case with VIR_CONNECT_DOMAIN_QEMU_MONITOR_EVENT_REGISTER_NOCASE, or as a POSIX
// extended regular expression with _REGEX), and gets a callback id; each matching event then
// reaches it as a DOMAIN_MONITOR_EVENT (6) message: the event's name, the vmm's timestamp, its
// "data" as JSON text. That is how a client sees what libvirt's own events do not carry: a
// precopy paused by a broken link (MIGRATION, status precopy-paused, then active again), a
// stall (X_MIGRATION_STALLED). Registration ends with _DEREGISTER (5) or with the connection;
// a read-write connection only, as libvirt's ACL (connect:write) has it.
#pragma once

#include <regex.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vmm/monitor/client/json_access.h"
#include "vmmd/daemon/callback_registry.h"
#include "vmmd/domain/domain_def.h"
#include "vmmd/rpc/dispatch.h"
#include "vmmd/server/outbox.h"

namespace vmmd {

class MonitorEventHub {
public:
    void connected(uint64_t connection, std::shared_ptr<Outbox> outbox);
    void disconnected(uint64_t connection);

    // One event of `def`'s vmm, running as `id`, as the vmm wrote it: sent to every callback
    // that matches it. An event without a usable name, or too large for libvirt, is dropped.
    void relay(const DomainDef& def, int id, const vmm::monitor::Json& event);

    // The register and deregister procedures (the QEMU program's 4 and 5).
    std::vector<rpc::Procedure> procedures();

    static constexpr size_t kMaxCallbacksPerConnection = 1024;
    static constexpr size_t kMaxEventPattern = 1024;  // an event name or expression, in bytes

private:
    // An expression, regfree'd with it once compiled.
    struct Pattern {
        regex_t re{};
        bool compiled = false;
        Pattern() = default;
        Pattern(const Pattern&) = delete;
        Pattern& operator=(const Pattern&) = delete;
        ~Pattern() {
            if (compiled) ::regfree(&re);
        }
    };
    struct Callback {
        int32_t id = 0;
        std::optional<Uuid> domain;       // nullopt: every domain
        std::optional<std::string> event; // nullopt: every event
        bool nocase = false;
        std::shared_ptr<Pattern> pattern; // set with _REGEX
        bool matches(const Uuid& uuid, const std::string& name) const;
    };
    rpc::Reply register_callback(rpc::Caller& caller, xdr::Reader& args);
    rpc::Reply deregister_callback(rpc::Caller& caller, xdr::Reader& args);

    CallbackRegistry<Callback> callbacks_{kMaxCallbacksPerConnection};
};

}  // namespace vmmd

// libvirt's QEMU program (src/remote/qemu_protocol.x, program 0x20008087), as `virsh
// qemu-monitor-command` and libvirt-qemu's virDomainQemuMonitorCommand speak it: one command to a
// running domain's vmm monitor. A QMP request (JSON) is answered with the JSON reply, an error
// included, as QEMU would give it; with VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP, one line of the text
// monitor is answered with its text (through vmm's human-monitor-command). That is how vmm's own
// commands, the ones libvirt has no call for, reach a virsh user: `info migrate-plan`,
// `migrate_set_parameter x-deadline 30s`, `info migrate_settings`.
// As under libvirt's QEMU driver: a read-write connection only, and the domain is driven behind
// vmmd's back, so every such command is logged with its domain ("custom monitor command", what
// libvirt calls the taint). vmm's own guards still hold (a `cont` that would run a guest twice is
// refused by the vmm).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "vmm/common/result.h"
#include "vmmd/domain/domain_store.h"
#include "vmmd/rpc/dispatch.h"
#include "vmm/monitor/client/json_access.h"

namespace vmmd {

// One QMP command to a running domain's vmm (Supervisor::qmp): its "return", or an Error with
// the vmm's "desc".
using MonitorCall = std::function<vmm::Result<vmm::monitor::Json>(const Uuid& uuid, const std::string& command,
                                                                  const vmm::monitor::Json& args)>;

std::vector<rpc::Procedure> qemu_procedures(const DomainStore& store, MonitorCall call);

// What QEMU_PROC_DOMAIN_MONITOR_COMMAND answers for `cmd` (pure but for `call`): the JSON reply
// text for a QMP request, the text for an HMP line; an rpc error for a request that is not one.
rpc::Reply monitor_command(const DomainView& v, const std::string& cmd, uint32_t flags, const MonitorCall& call);

}  // namespace vmmd

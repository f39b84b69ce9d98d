// The host's and the domains' statistics as libvirt's node and domain calls give them (virsh
// nodecpustats, nodememstats, freecell, vcpuinfo, vcpucount, dommemstat, domstats, maxmem),
// read from /proc (vmmd/runtime/proc_stats.h): the host's CPU times and memory, and each running
// domain's vmm process: its CPU time, resident memory and vCPU threads.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <vector>

#include "vmmd/domain/domain_store.h"
#include "vmmd/rpc/dispatch.h"

namespace vmmd {

// The pid of a running domain's vmm (Supervisor::vmm_pid).
using VmmPid = std::function<std::optional<pid_t>(const Uuid& uuid)>;

std::vector<rpc::Procedure> stats_procedures(const DomainStore& store, VmmPid vmm_pid);

}  // namespace vmmd

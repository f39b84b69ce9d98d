// The vmm command line that runs a domain: what vmmd passes to each vmm process it starts
// (pure: the definition and the paths in, the arguments out).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vmmd/domain/domain_def.h"

namespace vmmd {

struct Launch {
    std::string vmm;          // the vmm executable
    std::string qmp_socket;   // the QMP socket vmmd drives it through (0600)
    bool paused = false;      // -S: start with every vCPU paused
    std::string incoming;     // --incoming URI, for the destination of a migration ("" for a boot)
};

// argv for one vmm process, argv[0] included. The text monitor is off (vmmd drives QMP).
std::vector<std::string> vmm_arguments(const DomainDef& def, const Launch& launch);

// RLIMIT_MEMLOCK the process needs: the definition's <memtune><hard_limit> in bytes, as
// libvirt's QEMU driver sets it for RDMA (nullopt: leave the limit as it is).
std::optional<uint64_t> memlock_limit(const DomainDef& def);

}  // namespace vmmd

// RDMA under libvirt's <memtune><hard_limit>: vmmd makes the limit each vmm's RLIMIT_MEMLOCK (and
// takes CAP_IPC_LOCK away, so that it binds). rdma-pin-all must fit all RAM under it, and the
// source's memlock preflight refuses it otherwise; dynamic registration pins chunks as it writes
// them, so under a limit smaller than the RAM vmmd bounds it with vmm's rdma-pin-limit. Pure.
#pragma once

#include <cstdint>
#include <optional>

#include "vmm/common/result.h"

namespace vmmd {

// What the RDMA transport locks beyond the chunks it registers: three 512 KiB control buffers,
// and room for the queues' own memory.
constexpr uint64_t kRdmaPinHeadroom = 4ull << 20;

// The rdma-pin-limit (bytes) dynamic registration needs under `hard_limit` bytes for `ram` bytes
// of guest RAM: nullopt when everything fits anyway; an error when the limit leaves no room.
vmm::Result<std::optional<uint64_t>> dynamic_pin_limit(uint64_t ram, uint64_t hard_limit);

}  // namespace vmmd

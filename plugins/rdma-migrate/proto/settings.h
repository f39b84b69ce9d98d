// The rdma: transport's settings: one table of rows (vmm_setting, plugin_abi.h) that vmm lists,
// explains and checks beside its own, and that this side reads the values back through. The
// table is the only list of the transport's names.
#pragma once

#include <cstdint>

#include "vmm/common/result.h"
#include "vmm/plugin_abi.h"

namespace rdma_migrate {

using vmm::Error;
using vmm::Result;
using vmm::Status;

// What the rows hold, as this side uses them.
struct TransportSettings {
    bool pin_all = false;             // rdma-pin-all
    uint64_t chunk_size = 1 << 20;    // x-rdma-chunk-size
    bool chunk_size_set = false;      // ... set by the user (a destination then takes only that size)
    uint64_t pin_limit = 0;           // rdma-pin-limit, bytes (0 = unlimited)
    uint32_t channels = 1;            // rdma-channels
    bool postcopy_read = false;       // x-rdma-postcopy-read
    bool postcopy_read_push = false;  // x-rdma-postcopy-read-push
    uint32_t postcopy_read_wait_us = 1000;  // x-rdma-postcopy-read-wait
};

// The rows, ended by a row whose name is null (vmm_transport_ops.settings).
const vmm_setting* setting_rows();

// The values vmm passed (only those a user set; the rest keep the rows' fallbacks), each checked
// against its row again: a name no row has, or a value outside its row, is refused in one line.
Result<TransportSettings> read_settings(const vmm_kv* caps, uint32_t cap_count, const vmm_kv* params,
                                        uint32_t param_count);

}  // namespace rdma_migrate

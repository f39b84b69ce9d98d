// DirtyTracker: harvests the pages KVM saw written into the RAM blocks' dirty bitmaps.
// Two backends, chosen in the config:
//   log  - KVM_GET_DIRTY_LOG + KVM_CLEAR_DIRTY_LOG per slot (KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2);
//   ring - per-vCPU dirty rings (KVM_CAP_DIRTY_LOG_RING), harvested and reset.
// sync() may be called from any thread (the monitor's sampler, the migration thread, a vCPU whose
// ring filled up); calls are serialized inside.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "vmm/common/mapping.h"
#include "vmm/common/result.h"
#include "vmm/kvm/vcpu.h"
#include "vmm/kvm/vm.h"
#include "vmm/memory/guest_memory.h"

namespace vmm::memory {

enum class DirtyBackend { log, ring };

std::string_view to_string(DirtyBackend b);

class DirtyTracker {
public:
    virtual ~DirtyTracker() = default;
    virtual DirtyBackend backend() const = 0;
    // Called once per vCPU right after it is created (the ring backend maps its ring).
    virtual Status attach_vcpu(kvm::Vcpu& vcpu) = 0;
    // Moves what KVM logged since the last call into the blocks' bitmaps and re-arms tracking.
    // Returns the number of page-dirtying events harvested.
    virtual Result<uint64_t> sync() = 0;
    // Pages each vCPU dirtied since it was attached, in attach order: only the ring backend
    // knows who wrote a page (one ring per vCPU); the log backend returns nothing.
    virtual std::vector<uint64_t> dirtied_by_vcpu() const { return {}; }
};

// Enables the backend on `vm` (before any vCPU exists, as KVM requires) and returns it.
Result<std::unique_ptr<DirtyTracker>> make_dirty_tracker(DirtyBackend backend, kvm::Vm& vm,
                                                         const GuestMemory& memory);

}  // namespace vmm::memory

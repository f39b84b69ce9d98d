#include "vmm/memory/dirty_tracker.h"

#include <fmt/format.h>

namespace vmm::memory {

std::string_view to_string(DirtyBackend b) {
    switch (b) {
        case DirtyBackend::log: return "log";
        case DirtyBackend::ring: return "ring";
    }
    return "?";
}

namespace {

class LogTracker final : public DirtyTracker {
public:
    LogTracker(kvm::Vm& vm, const GuestMemory& memory) : vm_(vm), memory_(memory) {}

    DirtyBackend backend() const override { return DirtyBackend::log; }
    Status attach_vcpu(kvm::Vcpu&) override { return {}; }

    Result<uint64_t> sync() override {
        std::lock_guard lock(mutex_);
        uint64_t total = 0;
        for (const auto& b : memory_.blocks()) {
            scratch_.assign(b->dirty().words(), 0);
            if (auto s = vm_.get_dirty_log(b->slot(), scratch_.data()); !s) return s.error();
            uint64_t n = count_bits(scratch_.data(), scratch_.size());
            if (n == 0) continue;
            // Manual protect: pages stay writable (and unlogged) until cleared here, so clear
            // exactly what we read before merging it.
            auto pages = static_cast<uint32_t>(b->pages());
            if (auto s = vm_.clear_dirty_log(b->slot(), 0, pages, scratch_.data()); !s) {
                return s.error();
            }
            b->dirty().merge(scratch_.data());
            b->recent().merge(scratch_.data());
            b->add_dirtied(n);
            total += n;
        }
        return total;
    }

private:
    kvm::Vm& vm_;
    const GuestMemory& memory_;
    std::mutex mutex_;
    std::vector<uint64_t> scratch_;
};

constexpr uint32_t kRingEntries = 4096;

class RingTracker final : public DirtyTracker {
public:
    RingTracker(kvm::Vm& vm, const GuestMemory& memory) : vm_(vm), memory_(memory) {}

    DirtyBackend backend() const override { return DirtyBackend::ring; }

    Status attach_vcpu(kvm::Vcpu& vcpu) override {
        auto m = vcpu.map_dirty_ring(kRingEntries * sizeof(kvm_dirty_gfn));
        if (!m) return m.error();
        std::lock_guard lock(mutex_);
        rings_.push_back(Ring{std::move(*m), 0, 0});
        return {};
    }

    std::vector<uint64_t> dirtied_by_vcpu() const override {
        std::lock_guard lock(mutex_);
        std::vector<uint64_t> out;
        for (const auto& ring : rings_) out.push_back(ring.dirtied);
        return out;
    }

    Result<uint64_t> sync() override {
        std::lock_guard lock(mutex_);
        uint64_t total = 0;
        for (auto& ring : rings_) total += harvest(ring);
        if (total > 0) {
            if (auto r = vm_.reset_dirty_rings(); !r) return r.error();
        }
        return total;
    }

private:
    struct Ring {
        Mapping map;
        uint32_t fetch;
        uint64_t dirtied;  // harvested from this vCPU's ring since it was attached
    };

    uint64_t harvest(Ring& ring) {
        auto* gfns = ring.map.as<kvm_dirty_gfn>();
        uint64_t n = 0;
        for (;;) {
            kvm_dirty_gfn& e = gfns[ring.fetch % kRingEntries];
            if ((__atomic_load_n(&e.flags, __ATOMIC_ACQUIRE) & KVM_DIRTY_GFN_F_DIRTY) == 0) break;
            // slot is (address space << 16 | slot id); we use address space 0 only.
            if (RamBlock* b = memory_.find_by_slot(e.slot & 0xffff)) {
                b->dirty().set(e.offset);
                b->recent().set(e.offset);
                b->add_dirtied(1);
            }
            __atomic_store_n(&e.flags, KVM_DIRTY_GFN_F_RESET, __ATOMIC_RELEASE);
            ++ring.fetch;
            ++n;
        }
        ring.dirtied += n;
        return n;
    }

    kvm::Vm& vm_;
    const GuestMemory& memory_;
    mutable std::mutex mutex_;
    std::vector<Ring> rings_;
};

}  // namespace

Result<std::unique_ptr<DirtyTracker>> make_dirty_tracker(DirtyBackend backend, kvm::Vm& vm,
                                                         const GuestMemory& memory) {
    switch (backend) {
        case DirtyBackend::log: {
            if (vm.check_extension(KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2) == 0) {
                return Error("this kernel lacks KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2 (Linux >= 5.8 "
                             "has it): upgrade the host kernel");
            }
            if (auto s = vm.enable_cap(KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2,
                                       KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE);
                !s) {
                return s.error();
            }
            return std::unique_ptr<DirtyTracker>(new LogTracker(vm, memory));
        }
        case DirtyBackend::ring: {
            uint64_t bytes = kRingEntries * sizeof(kvm_dirty_gfn);
            auto max = static_cast<uint64_t>(vm.check_extension(KVM_CAP_DIRTY_LOG_RING));
            if (max < bytes) {
                return Error("this kernel offers no KVM dirty ring (KVM_CAP_DIRTY_LOG_RING): set "
                             "dirty_tracking = \"log\" in the config");
            }
            if (auto s = vm.enable_cap(KVM_CAP_DIRTY_LOG_RING, bytes); !s) return s.error();
            return std::unique_ptr<DirtyTracker>(new RingTracker(vm, memory));
        }
    }
    return Error("unknown dirty-tracking backend");
}

}  // namespace vmm::memory

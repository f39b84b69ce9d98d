// Machine's handling of vCPU exits (runs on the vCPU threads).
#include <fmt/format.h>

#include "vmm/common/log.h"
#include "vmm/machine/machine.h"

namespace vmm::machine {

ExitAction Machine::handle_io(uint32_t cpu, kvm_run& run) {
    auto* base = reinterpret_cast<uint8_t*>(&run) + run.io.data_offset;
    for (uint32_t i = 0; i < run.io.count; ++i) {
        std::span<uint8_t> data(base + static_cast<size_t>(i) * run.io.size, run.io.size);
        bool claimed = run.io.direction == KVM_EXIT_IO_OUT ? bus_.write(cpu, run.io.port, data)
                                                           : bus_.read(cpu, run.io.port, data);
        if (!claimed) log::debug("vCPU {}: port {:#x} has no device", cpu, run.io.port);
    }
    return ExitAction::resume;
}

ExitAction Machine::handle_exit(uint32_t cpu, kvm_run& run) {
    switch (run.exit_reason) {
        case KVM_EXIT_IO: return handle_io(cpu, run);
        case KVM_EXIT_MMIO:
            if (!run.mmio.is_write) std::fill(std::begin(run.mmio.data), std::end(run.mmio.data), 0xff);
            return ExitAction::resume;
        case KVM_EXIT_HLT: return ExitAction::halt;
        case KVM_EXIT_INTR: return ExitAction::resume;
        case KVM_EXIT_DIRTY_RING_FULL:
            if (auto n = tracker_->sync(); !n) {
                vcpu_failed(cpu, n.error());
                return ExitAction::stop;
            }
            return ExitAction::resume;
        case KVM_EXIT_SHUTDOWN:
            log::error("vCPU {}: the guest triple-faulted (KVM_EXIT_SHUTDOWN)", cpu);
            run_.end(1, RunState::shutdown);
            return ExitAction::stop;
        case KVM_EXIT_SYSTEM_EVENT:
            run_.end(0, RunState::shutdown);
            return ExitAction::stop;
        case KVM_EXIT_FAIL_ENTRY:
            vcpu_failed(cpu, Error(fmt::format("KVM_EXIT_FAIL_ENTRY, hardware reason {:#x}",
                                               run.fail_entry.hardware_entry_failure_reason)));
            return ExitAction::stop;
        case KVM_EXIT_INTERNAL_ERROR:
            vcpu_failed(cpu, Error(fmt::format("KVM_EXIT_INTERNAL_ERROR, suberror {}", run.internal.suberror)));
            return ExitAction::stop;
        default:
            vcpu_failed(cpu, Error(fmt::format("unhandled exit reason {}", run.exit_reason)));
            return ExitAction::stop;
    }
}

void Machine::vcpu_failed(uint32_t cpu, const Error& error) {
    log::error("vCPU {} stopped: {}", cpu, error.message());
    // Keep the process and the monitor alive for inspection, like QEMU's internal-error state.
    run_.vcpu_failed();
}

}  // namespace vmm::machine

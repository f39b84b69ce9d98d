// Machine: one VM. Owns KVM objects, RAM, devices and the vCPU threads; boots a payload;
// runs, pauses and stops; saves and loads vCPU and device state.
//
// Thread rules: the public methods may be called from any thread except where noted.
// run().pause() returns only when every vCPU is out of KVM_RUN.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vmm/common/bytes.h"
#include "vmm/common/result.h"
#include "vmm/devices/control.h"
#include "vmm/devices/pio_bus.h"
#include "vmm/devices/serial.h"
#include "vmm/kvm/system.h"
#include "vmm/machine/dirty_limit.h"
#include "vmm/machine/payload.h"
#include "vmm/machine/run_control.h"
#include "vmm/machine/vcpu_runner.h"
#include "vmm/machine/vcpu_state.h"
#include "vmm/machine/vcpu_throttle.h"
#include "vmm/machine/vcpus.h"
#include "vmm/memory/dirty_rate.h"
#include "vmm/memory/dirty_tracker.h"
#include "vmm/memory/guest_memory.h"

namespace vmm::machine {

struct MachineSpec {
    std::string name = "vmm";
    uint32_t vcpus = 1;
    std::vector<memory::RamBlockSpec> ram;
    memory::DirtyBackend dirty_backend = memory::DirtyBackend::log;
    uint32_t dirty_sample_ms = 1000;
    bool start_paused = false;                            // -S: also after an incoming migration
    devices::Serial::Sink serial_sink;                    // empty: serial output discarded
    std::function<void(std::string_view)> guest_message;  // control-device text lines
    std::function<void(RunState)> state_changed;          // after every run-state change
};

class Machine final : public VcpuExitHandler {
public:
    static Result<std::unique_ptr<Machine>> create(const MachineSpec& spec);
    ~Machine() override;

    // Loads the payload, builds the boot structures and sets every vCPU at the entry point.
    // The machine stays in prelaunch until run().resume().
    Status boot(const std::string& payload_path, const std::string& cmdline);

    // The run state and its rules (run_control.h): resume, pause, end; resume() is refused once
    // the machine has ended or hit an internal error, and while a refusal is set (refuse_resume:
    // a source whose guest went on to the destination must not run it too) unless forced; a
    // destination waits in inmigrate, a source that handed its guest over in postmigrate.
    RunControl& run() { return run_; }
    const RunControl& run() const { return run_; }
    // 'quit' while the guest's state is not whole here (RunControl::set_incomplete: a postcopy
    // destination still lacking pages only the source has) ends the machine with this status.
    static constexpr int kIncompleteExit = 3;
    // The vCPUs (vcpus.h): their count, threads, throttle.
    Vcpus& vcpus() { return vcpus_; }
    const Vcpus& vcpus() const { return vcpus_; }

    // Require paused (or prelaunch) state.
    Result<std::vector<VcpuState>> save_vcpus();
    Status load_vcpus(const std::vector<VcpuState>& states);
    void save_devices(ByteWriter& out) const;
    Status load_devices(ByteReader& in);

    const MachineSpec& spec() const { return spec_; }
    const memory::GuestMemory& memory() const { return *memory_; }
    memory::DirtyTracker& dirty_tracker() { return *tracker_; }
    memory::DirtyRateSampler& dirty_rate() { return *sampler_; }
    // The per-vCPU dirty limits (dirty_limit.h): only where the tracker knows which vCPU wrote a
    // page (the dirty ring); otherwise one line saying so.
    Result<DirtyLimiter*> dirty_limiter();
    devices::ControlDevice& control() { return *control_; }
    devices::Serial& serial() { return *serial_; }
    // Where boot() put the payload (empty before boot, or on a migration destination).
    const LoadedPayload& payload_image() const { return payload_; }

private:
    explicit Machine(MachineSpec spec);
    Status init_kvm();
    Status init_devices();
    Status write_boot_info(const std::string& cmdline);
    Status set_boot_registers(uint64_t entry, uint64_t cr3);

    ExitAction handle_exit(uint32_t cpu, kvm_run& run) override;
    void vcpu_failed(uint32_t cpu, const Error& error) override;
    ExitAction handle_io(uint32_t cpu, kvm_run& run);

    MachineSpec spec_;
    std::optional<kvm::System> kvm_;
    std::optional<kvm::Vm> vm_;
    std::optional<memory::GuestMemory> memory_;
    std::unique_ptr<memory::DirtyTracker> tracker_;
    std::unique_ptr<devices::Serial> serial_;
    std::unique_ptr<devices::ControlDevice> control_;
    devices::PioBus bus_;
    Vcpus vcpus_;  // stopped first in ~Machine, while devices and memory still exist
    std::unique_ptr<memory::DirtyRateSampler> sampler_;
    std::unique_ptr<DirtyLimiter> limiter_;  // throttles vcpus_ from sampler_'s counts: goes first
    LoadedPayload payload_;
    RunControl run_;  // drives vcpus_
};

}  // namespace vmm::machine

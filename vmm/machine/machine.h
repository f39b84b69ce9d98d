// Machine: one VM. Owns KVM objects, RAM, devices and the vCPU threads; boots a payload;
// runs, pauses and stops; saves and loads vCPU and device state.
//
// Thread rules: the public methods may be called from any thread except where noted.
// pause() returns only when every vCPU is out of KVM_RUN.
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
#include "vmm/machine/payload.h"
#include "vmm/machine/run_control.h"
#include "vmm/machine/vcpu_runner.h"
#include "vmm/machine/vcpu_state.h"
#include "vmm/machine/vcpu_throttle.h"
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

class Machine final : public VcpuExitHandler, private VcpuGroup {
public:
    static Result<std::unique_ptr<Machine>> create(const MachineSpec& spec);
    ~Machine() override;

    // Loads the payload, builds the boot structures and sets every vCPU at the entry point.
    // The machine stays in prelaunch until resume().
    Status boot(const std::string& payload_path, const std::string& cmdline);

    // The run state and its rules (run_control.h). resume() is refused once the machine has
    // ended or hit an internal error, and while a refusal is set (refuse_resume: a source whose
    // guest went on to the destination in postcopy must not run it too) unless `force`.
    Status resume(bool force = false) { return run_.resume(force); }
    void refuse_resume(std::string why) { run_.refuse_resume(std::move(why)); }
    // While set, the guest's state is not whole here (a postcopy destination still lacking pages
    // only the source has): 'quit' ends the machine with kIncompleteExit instead of 0. "" clears.
    void set_incomplete(std::string why) { run_.set_incomplete(std::move(why)); }
    std::string incomplete() const { return run_.incomplete(); }
    static constexpr int kIncompleteExit = 3;
    void pause() { run_.pause(); }  // returns once every vCPU is out of KVM_RUN
    // Ends the machine: every vCPU stops; wait_for_end() returns `exit_code`. Safe from a vCPU.
    void end(int exit_code, RunState final_state = RunState::shutdown) { run_.end(exit_code, final_state); }
    int wait_for_end() { return run_.wait_for_end(); }
    // Returns once the machine is paused (e.g. after pause_at_step) or has ended.
    void wait_until_paused() { run_.wait_until_paused(); }
    RunState run_state() const { return run_.state(); }
    bool has_ended() const { return run_.has_ended(); }

    // Migration: a destination waits in inmigrate; a source that handed its guest over stays
    // paused in postmigrate (like QEMU; 'cont' would run a second copy).
    void set_incoming() { run_.set_incoming(); }
    void set_postmigrate() { run_.set_postmigrate(); }
    // The incoming migration loaded everything: paused, then running unless `stay_paused`.
    Status finish_incoming(bool stay_paused) { return run_.finish_incoming(stay_paused); }
    // Auto-converge: each vCPU sleeps `percent` of the time (0 = off; vcpu_throttle.h).
    void set_throttle(uint32_t percent) { throttle_->set(percent); }
    uint32_t throttle() const { return throttle_->percent(); }

    // Test hook: pause every vCPU once the guest reports step >= `step` (0 = off).
    void pause_at_step(uint64_t step) { run_.pause_at_step(step); }

    // Require paused (or prelaunch) state.
    Result<std::vector<VcpuState>> save_vcpus();
    Status load_vcpus(const std::vector<VcpuState>& states);
    void save_devices(ByteWriter& out) const;
    Status load_devices(ByteReader& in);

    const MachineSpec& spec() const { return spec_; }
    const memory::GuestMemory& memory() const { return *memory_; }
    memory::DirtyTracker& dirty_tracker() { return *tracker_; }
    memory::DirtyRateSampler& dirty_rate() { return *sampler_; }
    devices::ControlDevice& control() { return *control_; }
    devices::Serial& serial() { return *serial_; }
    size_t vcpu_count() const { return vcpus_.size(); }
    // Each vCPU thread's id, in vCPU order (0 for one not started).
    std::vector<uint32_t> vcpu_tids() const;
    // Where boot() put the payload (empty before boot, or on a migration destination).
    const LoadedPayload& payload_image() const { return payload_; }

private:
    explicit Machine(MachineSpec spec);
    Status init_kvm();
    Status init_devices();
    Status init_vcpus();
    Status write_boot_info(const std::string& cmdline);
    Status set_boot_registers(uint64_t entry, uint64_t cr3);

    ExitAction handle_exit(uint32_t cpu, kvm_run& run) override;
    void vcpu_failed(uint32_t cpu, const Error& error) override;
    ExitAction handle_io(uint32_t cpu, kvm_run& run);
    // VcpuGroup, for run_: every runner at once.
    void request_run() override;
    void request_pause() override;
    void wait_not_running() override;
    void request_stop() override;

    MachineSpec spec_;
    std::optional<kvm::System> kvm_;
    std::optional<kvm::Vm> vm_;
    std::optional<memory::GuestMemory> memory_;
    std::unique_ptr<memory::DirtyTracker> tracker_;
    std::unique_ptr<devices::Serial> serial_;
    std::unique_ptr<devices::ControlDevice> control_;
    devices::PioBus bus_;
    std::vector<std::unique_ptr<kvm::Vcpu>> vcpus_;
    std::vector<std::unique_ptr<VcpuRunner>> runners_;
    std::unique_ptr<memory::DirtyRateSampler> sampler_;
    std::vector<uint32_t> msrs_;
    size_t xsave_size_ = 0;
    LoadedPayload payload_;

    RunControl run_;
    std::unique_ptr<VcpuThrottle> throttle_;  // kicks runners_: destroyed before them
};

}  // namespace vmm::machine

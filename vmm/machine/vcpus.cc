#include "vmm/machine/vcpus.h"

#include <fmt/format.h>

namespace vmm::machine {

namespace {

std::vector<kvm_cpuid_entry2> cpuid_for(std::vector<kvm_cpuid_entry2> entries, uint32_t id) {
    for (auto& e : entries) {
        if (e.function == 1) e.ebx = (e.ebx & 0x00ffffff) | (id << 24);  // initial APIC id
        if (e.function == 0xb || e.function == 0x1f) e.edx = id;         // x2APIC id
    }
    return entries;
}

}  // namespace

Status Vcpus::create(const kvm::System& kvm, kvm::Vm& vm, memory::DirtyTracker& tracker, uint32_t count,
                     VcpuExitHandler& exits) {
    auto run_size = kvm.vcpu_mmap_size();
    if (!run_size) return run_size.error();
    auto cpuid = kvm.supported_cpuid();
    if (!cpuid) return cpuid.error();
    int xsave2 = vm.check_extension(KVM_CAP_XSAVE2);
    xsave_size_ = xsave2 > 0 ? static_cast<size_t>(xsave2) : sizeof(kvm_xsave);
    for (uint32_t i = 0; i < count; ++i) {
        auto v = vm.create_vcpu(i, *run_size);
        if (!v) return v.error();
        auto vcpu = std::make_unique<kvm::Vcpu>(std::move(*v));
        if (auto s = vcpu->set_cpuid2(cpuid_for(*cpuid, i)); !s) return s;
        if (auto s = tracker.attach_vcpu(*vcpu); !s) return s;
        vcpus_.push_back(std::move(vcpu));
    }
    auto candidates = kvm.msr_index_list();
    if (!candidates) return candidates.error();
    auto msrs = probe_saveable_msrs(*vcpus_[0], *candidates);
    if (!msrs) return msrs.error();
    msrs_ = std::move(*msrs);
    VcpuRunner::install_kick_signal();
    for (auto& v : vcpus_) {
        runners_.push_back(std::make_unique<VcpuRunner>(*v, exits));
        runners_.back()->start_thread();
    }
    return {};
}

void Vcpus::stop() {
    throttle_.reset();  // its thread kicks the runners
    for (auto& r : runners_) r->request_stop();
    runners_.clear();  // joins the vCPU threads
}

void Vcpus::request_run() {
    for (auto& r : runners_) r->request_run();
}

void Vcpus::request_pause() {
    for (auto& r : runners_) r->request_pause();
}

void Vcpus::wait_not_running() {
    for (auto& r : runners_) r->wait_until_not_running();
}

void Vcpus::request_stop() {
    for (auto& r : runners_) r->request_stop();
}

void Vcpus::sleep(uint32_t cpu, uint64_t ns) {
    if (cpu < runners_.size()) runners_[cpu]->sleep_interruptible(ns);
}

Result<std::vector<VcpuState>> Vcpus::save() const {
    std::vector<VcpuState> out;
    for (size_t i = 0; i < vcpus_.size(); ++i) {
        if (runners_[i]->state() == VcpuRunState::running) {
            return Error(fmt::format("vCPU {} is running: pause the machine first", i));
        }
        auto st = save_vcpu_state(*vcpus_[i], msrs_, xsave_size_);
        if (!st) return st.error().context(fmt::format("saving vCPU {}", i));
        out.push_back(std::move(*st));
    }
    return out;
}

Status Vcpus::load(const std::vector<VcpuState>& states) {
    if (states.size() != vcpus_.size()) {
        return Error(fmt::format("state has {} vCPUs, this machine has {}", states.size(), vcpus_.size()));
    }
    for (size_t i = 0; i < vcpus_.size(); ++i) {
        if (runners_[i]->state() == VcpuRunState::running) {
            return Error(fmt::format("vCPU {} is running: pause the machine first", i));
        }
        if (auto s = load_vcpu_state(*vcpus_[i], states[i]); !s) {
            return s.error().context(fmt::format("loading vCPU {}", i));
        }
    }
    return {};
}

std::vector<uint32_t> Vcpus::tids() const {
    std::vector<uint32_t> out;
    for (const auto& r : runners_) out.push_back(r->tid());
    return out;
}

}  // namespace vmm::machine

#include "vmm/machine/machine.h"

#include <fmt/format.h>

#include "vmm/common/log.h"

namespace vmm::machine {

namespace {
constexpr uint64_t kTssAddr = 0xfffbd000;
constexpr uint64_t kIdentityMapAddr = 0xfffbc000;
}  // namespace

Machine::Machine(MachineSpec spec)
    : spec_(std::move(spec)), run_(*this, spec_.state_changed), throttle_(std::make_unique<VcpuThrottle>(runners_)) {}

Machine::~Machine() {
    throttle_.reset();  // its thread kicks the runners
    for (auto& r : runners_) r->request_stop();
    runners_.clear();  // joins the vCPU threads while devices and memory still exist
    sampler_.reset();
}

Result<std::unique_ptr<Machine>> Machine::create(const MachineSpec& spec) {
    if (spec.vcpus == 0 || spec.vcpus > devices::ControlDevice::kMaxCpus) {
        return Error(fmt::format("{} vCPUs requested: choose 1 to {}", spec.vcpus,
                                 devices::ControlDevice::kMaxCpus));
    }
    std::unique_ptr<Machine> m(new Machine(spec));
    if (auto s = m->init_kvm(); !s) return s.error();
    if (auto s = m->init_devices(); !s) return s.error();
    if (auto s = m->init_vcpus(); !s) return s.error();
    m->sampler_ = std::make_unique<memory::DirtyRateSampler>(
        *m->tracker_, std::chrono::milliseconds(spec.dirty_sample_ms ? spec.dirty_sample_ms : 1000));
    return m;
}

Status Machine::init_kvm() {
    auto sys = kvm::System::open();
    if (!sys) return sys.error();
    kvm_.emplace(std::move(*sys));
    auto max_vcpus = static_cast<uint32_t>(kvm_->check_extension(KVM_CAP_MAX_VCPUS));
    if (max_vcpus != 0 && spec_.vcpus > max_vcpus) {
        return Error(fmt::format("{} vCPUs requested but KVM allows {}", spec_.vcpus, max_vcpus));
    }
    auto vm = kvm_->create_vm();
    if (!vm) return vm.error();
    vm_.emplace(std::move(*vm));
    if (auto s = vm_->set_tss_addr(kTssAddr); !s) return s;
    if (auto s = vm_->set_identity_map_addr(kIdentityMapAddr); !s) return s;
    auto mem = memory::GuestMemory::create(spec_.ram);
    if (!mem) return mem.error();
    memory_.emplace(std::move(*mem));
    auto tracker = memory::make_dirty_tracker(spec_.dirty_backend, *vm_, *memory_);
    if (!tracker) return tracker.error();
    tracker_ = std::move(*tracker);
    return memory_->register_slots(*vm_);
}

Status Machine::init_devices() {
    serial_ = std::make_unique<devices::Serial>(spec_.serial_sink);
    devices::ControlHooks hooks;
    hooks.sleep = [this](uint32_t cpu, uint64_t ns) {
        constexpr uint64_t kMaxSleep = 10'000'000'000ull;
        if (cpu < runners_.size()) runners_[cpu]->sleep_interruptible(std::min(ns, kMaxSleep));
    };
    hooks.exit = [this](uint32_t code) { end(static_cast<int>(code)); };
    hooks.step = [this](uint64_t step) { run_.guest_step(step); };
    hooks.message = [this](std::string_view line) {
        if (spec_.guest_message) spec_.guest_message(line);
    };
    control_ = std::make_unique<devices::ControlDevice>(std::move(hooks));
    if (auto s = bus_.add(devices::kCom1Base, devices::kSerialPorts, *serial_); !s) return s;
    return bus_.add(VMMC_BASE, VMMC_PORTS, *control_);
}

static std::vector<kvm_cpuid_entry2> cpuid_for(std::vector<kvm_cpuid_entry2> entries, uint32_t id) {
    for (auto& e : entries) {
        if (e.function == 1) e.ebx = (e.ebx & 0x00ffffff) | (id << 24);  // initial APIC id
        if (e.function == 0xb || e.function == 0x1f) e.edx = id;         // x2APIC id
    }
    return entries;
}

Status Machine::init_vcpus() {
    auto run_size = kvm_->vcpu_mmap_size();
    if (!run_size) return run_size.error();
    auto cpuid = kvm_->supported_cpuid();
    if (!cpuid) return cpuid.error();
    int xsave2 = vm_->check_extension(KVM_CAP_XSAVE2);
    xsave_size_ = xsave2 > 0 ? static_cast<size_t>(xsave2) : sizeof(kvm_xsave);
    for (uint32_t i = 0; i < spec_.vcpus; ++i) {
        auto v = vm_->create_vcpu(i, *run_size);
        if (!v) return v.error();
        auto vcpu = std::make_unique<kvm::Vcpu>(std::move(*v));
        if (auto s = vcpu->set_cpuid2(cpuid_for(*cpuid, i)); !s) return s;
        if (auto s = tracker_->attach_vcpu(*vcpu); !s) return s;
        vcpus_.push_back(std::move(vcpu));
    }
    auto candidates = kvm_->msr_index_list();
    if (!candidates) return candidates.error();
    auto msrs = probe_saveable_msrs(*vcpus_[0], *candidates);
    if (!msrs) return msrs.error();
    msrs_ = std::move(*msrs);
    VcpuRunner::install_kick_signal();
    for (auto& v : vcpus_) {
        runners_.push_back(std::make_unique<VcpuRunner>(*v, *this));
        runners_.back()->start_thread();
    }
    return {};
}

void Machine::request_run() {
    for (auto& r : runners_) r->request_run();
}

void Machine::request_pause() {
    for (auto& r : runners_) r->request_pause();
}

void Machine::wait_not_running() {
    for (auto& r : runners_) r->wait_until_not_running();
}

void Machine::request_stop() {
    for (auto& r : runners_) r->request_stop();
}

Result<std::vector<VcpuState>> Machine::save_vcpus() {
    if (auto s = run_.state_usable(); !s) return s.error();
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

Status Machine::load_vcpus(const std::vector<VcpuState>& states) {
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

void Machine::save_devices(ByteWriter& out) const {
    auto devs = bus_.devices();
    out.put(static_cast<uint32_t>(devs.size()));
    for (const auto* d : devs) {
        out.put_string(d->name());
        ByteWriter section;
        d->save(section);
        out.put_blob(section.bytes());
    }
}

Status Machine::load_devices(ByteReader& in) {
    uint32_t n = 0;
    if (auto s = in.get(n); !s) return s;
    auto devs = bus_.devices();
    if (n != devs.size()) return Error(fmt::format("device state has {} devices, expected {}", n, devs.size()));
    for (auto* d : devs) {
        std::string name;
        std::vector<uint8_t> blob;
        if (auto s = in.get_string(name, 64); !s) return s;
        if (name != d->name()) return Error(fmt::format("device state: found '{}' where '{}' was expected", name, d->name()));
        if (auto s = in.get_blob(blob, 1 << 20); !s) return s;
        ByteReader section(blob, d->name());
        if (auto s = d->load(section); !s) return s;
        if (auto s = section.expect_end(); !s) return s;
    }
    return {};
}

std::vector<uint32_t> Machine::vcpu_tids() const {
    std::vector<uint32_t> out;
    for (const auto& r : runners_) out.push_back(r->tid());
    return out;
}

}  // namespace vmm::machine

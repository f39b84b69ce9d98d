#include "vmm/machine/machine.h"

#include <fmt/format.h>

#include "vmm/common/log.h"

namespace vmm::machine {

namespace {
constexpr uint64_t kTssAddr = 0xfffbd000;
constexpr uint64_t kIdentityMapAddr = 0xfffbc000;
}  // namespace

Machine::Machine(MachineSpec spec) : spec_(std::move(spec)), run_(vcpus_, spec_.state_changed) {}

Machine::~Machine() {
    limiter_.reset();
    vcpus_.stop();  // joins the vCPU threads while devices and memory still exist
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
    if (auto s = m->vcpus_.create(*m->kvm_, *m->vm_, *m->tracker_, spec.vcpus, *m); !s) return s.error();
    auto period = std::chrono::milliseconds(spec.dirty_sample_ms ? spec.dirty_sample_ms : 1000);
    m->sampler_ = std::make_unique<memory::DirtyRateSampler>(*m->tracker_, m->memory(), period);
    m->limiter_ = std::make_unique<DirtyLimiter>(m->vcpus_, *m->sampler_, period);
    return m;
}

Result<DirtyLimiter*> Machine::dirty_limiter() {
    if (tracker_->dirtied_by_vcpu().empty()) {
        return Error("a dirty limit per vCPU needs the dirty ring, which says which vCPU wrote each page: start vmm "
                     "with --dirty-tracking ring (this one tracks with the dirty log)");
    }
    return limiter_.get();
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
        vcpus_.sleep(cpu, std::min(ns, kMaxSleep));
    };
    hooks.exit = [this](uint32_t code) { run_.end(static_cast<int>(code)); };
    hooks.step = [this](uint64_t step) { run_.guest_step(step); };
    hooks.message = [this](std::string_view line) {
        if (spec_.guest_message) spec_.guest_message(line);
    };
    control_ = std::make_unique<devices::ControlDevice>(std::move(hooks));
    if (auto s = bus_.add(devices::kCom1Base, devices::kSerialPorts, *serial_); !s) return s;
    return bus_.add(VMMC_BASE, VMMC_PORTS, *control_);
}

Result<std::vector<VcpuState>> Machine::save_vcpus() {
    if (auto s = run_.state_usable(); !s) return s.error();
    return vcpus_.save();
}

Status Machine::load_vcpus(const std::vector<VcpuState>& states) { return vcpus_.load(states); }

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

}  // namespace vmm::machine

// Machine::boot: payload, boot structures, initial registers.
#include <fmt/format.h>

#include <cstring>

#include "vmm/machine/boot_abi.h"
#include "vmm/machine/long_mode.h"
#include "vmm/machine/machine.h"
#include "vmm/machine/payload.h"

namespace vmm::machine {

Status Machine::boot(const std::string& payload_path, const std::string& cmdline) {
    auto elf = read_file(payload_path);
    if (!elf) return elf.error();
    auto loaded = load_payload(*elf, *memory_);
    if (!loaded) return loaded.error().context(payload_path);
    if (auto s = write_gdt(*memory_); !s) return s.error().context("writing the GDT (the first RAM block must start at 0)");
    uint64_t top = 0;
    for (const auto& b : memory_->blocks()) top = std::max(top, b->guest_addr() + b->size());
    auto cr3 = write_page_tables(*memory_, std::max<uint64_t>(top, 4ull << 30));
    if (!cr3) return cr3.error();
    if (auto s = write_boot_info(cmdline); !s) return s;
    if (auto s = set_boot_registers(loaded->entry, *cr3); !s) return s;
    payload_ = *loaded;
    return {};
}

Status Machine::write_boot_info(const std::string& cmdline) {
    if (cmdline.size() + 1 > VMM_BOOT_CMDLINE_MAX) {
        return Error(fmt::format("payload parameters are {} bytes; the limit is {}", cmdline.size(),
                                 VMM_BOOT_CMDLINE_MAX - 1));
    }
    if (memory_->blocks().size() > VMM_BOOT_MAX_RAM) {
        return Error(fmt::format("{} RAM blocks; a payload can be told about at most {}",
                                 memory_->blocks().size(), VMM_BOOT_MAX_RAM));
    }
    vmm_boot_info info{};
    info.magic = VMM_BOOT_MAGIC;
    info.cpu_count = static_cast<uint32_t>(vcpus_.count());
    info.ram_count = static_cast<uint32_t>(memory_->blocks().size());
    info.cmdline_addr = VMM_BOOT_CMDLINE;
    info.cmdline_len = static_cast<uint32_t>(cmdline.size());
    info.flags = VMM_BOOT_F_CONTROL;
    for (size_t i = 0; i < memory_->blocks().size(); ++i) {
        info.ram[i].addr = memory_->blocks()[i]->guest_addr();
        info.ram[i].size = memory_->blocks()[i]->size();
    }
    std::vector<uint8_t> text(cmdline.begin(), cmdline.end());
    text.push_back(0);
    if (auto s = memory_->write(VMM_BOOT_CMDLINE, text); !s) return s;
    return memory_->write_value(VMM_BOOT_INFO, info);
}

Status Machine::set_boot_registers(uint64_t entry, uint64_t cr3) {
    for (size_t i = 0; i < vcpus_.count(); ++i) {
        kvm::Vcpu& vcpu = vcpus_.vcpu(i);
        auto base = vcpu.get_sregs();
        if (!base) return base.error();
        if (auto s = vcpu.set_sregs(long_mode_sregs(*base, cr3)); !s) return s;
        kvm_regs regs{};
        regs.rip = entry;
        regs.rflags = 0x2;
        regs.rdi = VMM_BOOT_INFO;
        regs.rsi = i;
        if (auto s = vcpu.set_regs(regs); !s) return s;
    }
    return {};
}

}  // namespace vmm::machine

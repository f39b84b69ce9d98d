#include "vmm/devices/pio_bus.h"

#include <fmt/format.h>

#include <algorithm>

namespace vmm::devices {

uint32_t io_value(std::span<const uint8_t> data) {
    uint32_t v = 0;
    for (size_t i = 0; i < data.size() && i < 4; ++i) v |= static_cast<uint32_t>(data[i]) << (8 * i);
    return v;
}

void io_store(std::span<uint8_t> data, uint32_t value) {
    for (size_t i = 0; i < data.size(); ++i) data[i] = i < 4 ? static_cast<uint8_t>(value >> (8 * i)) : 0;
}

Status PioBus::add(uint16_t base, uint16_t len, PioDevice& device) {
    uint32_t end = uint32_t{base} + len;
    if (len == 0 || end > 0x10000) return Error(fmt::format("port range {:#x}+{} is invalid", base, len));
    for (const auto& r : ranges_) {
        if (base < r.base + r.len && r.base < end) {
            return Error(fmt::format("ports {:#x}+{} of {} overlap {}", base, len, device.name(),
                                     r.device->name()));
        }
    }
    ranges_.push_back({base, len, &device});
    return {};
}

const PioBus::Range* PioBus::find(uint16_t port) const {
    auto it = std::find_if(ranges_.begin(), ranges_.end(),
                           [port](const Range& r) { return port >= r.base && port - r.base < r.len; });
    return it == ranges_.end() ? nullptr : &*it;
}

bool PioBus::read(uint32_t cpu, uint16_t port, std::span<uint8_t> data) {
    const Range* r = find(port);
    if (r == nullptr) {
        std::fill(data.begin(), data.end(), 0xff);
        return false;
    }
    r->device->io_read(cpu, static_cast<uint16_t>(port - r->base), data);
    return true;
}

bool PioBus::write(uint32_t cpu, uint16_t port, std::span<const uint8_t> data) {
    const Range* r = find(port);
    if (r == nullptr) return false;
    r->device->io_write(cpu, static_cast<uint16_t>(port - r->base), data);
    return true;
}

std::vector<PioDevice*> PioBus::devices() const {
    std::vector<PioDevice*> out;
    for (const auto& r : ranges_) out.push_back(r.device);
    return out;
}

}  // namespace vmm::devices

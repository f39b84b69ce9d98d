// PioBus: routes port I/O exits to the device registered for the port.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/devices/device.h"

namespace vmm::devices {

class PioBus {
public:
    // Registers [base, base+len); overlapping ranges are refused.
    Status add(uint16_t base, uint16_t len, PioDevice& device);
    // Returns false for a port no device claims (reads then see all ones, like real hardware).
    bool read(uint32_t cpu, uint16_t port, std::span<uint8_t> data);
    bool write(uint32_t cpu, uint16_t port, std::span<const uint8_t> data);
    std::vector<PioDevice*> devices() const;

private:
    struct Range {
        uint16_t base;
        uint16_t len;
        PioDevice* device;
    };
    const Range* find(uint16_t port) const;
    std::vector<Range> ranges_;
};

}  // namespace vmm::devices

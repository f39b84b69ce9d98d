// Device: something on the port-I/O bus whose state can be saved and loaded (migration carries
// these bytes). Handlers run on the vCPU thread that made the access.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "vmm/common/bytes.h"
#include "vmm/common/result.h"

namespace vmm::devices {

class PioDevice {
public:
    virtual ~PioDevice() = default;
    // Stable identifier; names the device's section in saved state.
    virtual std::string_view name() const = 0;
    // `cpu` is the index of the vCPU making the access; `offset` is relative to the device's
    // base port; data.size() is 1, 2 or 4.
    virtual void io_read(uint32_t cpu, uint16_t offset, std::span<uint8_t> data) = 0;
    virtual void io_write(uint32_t cpu, uint16_t offset, std::span<const uint8_t> data) = 0;
    virtual void save(ByteWriter& out) const = 0;
    // Must validate everything it reads; on failure the device is left unchanged.
    virtual Status load(ByteReader& in) = 0;
};

// Little-endian value of an access of 1, 2 or 4 bytes, and the reverse.
uint32_t io_value(std::span<const uint8_t> data);
void io_store(std::span<uint8_t> data, uint32_t value);

}  // namespace vmm::devices

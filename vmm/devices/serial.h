// Serial: a 16550-style UART (COM1 at 0x3f8). Transmit only reaches the host: bytes the guest
// writes go to a sink (terminal, file, or a test's buffer); the receiver is always empty and
// the transmitter always ready, so a guest never waits on it.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "vmm/devices/device.h"

namespace vmm::devices {

constexpr uint16_t kCom1Base = 0x3f8;
constexpr uint16_t kSerialPorts = 8;

class Serial final : public PioDevice {
public:
    using Sink = std::function<void(std::string_view)>;
    explicit Serial(Sink sink) : sink_(std::move(sink)) {}

    std::string_view name() const override { return "serial0"; }
    void io_read(uint32_t /*cpu*/, uint16_t offset, std::span<uint8_t> data) override;
    void io_write(uint32_t /*cpu*/, uint16_t offset, std::span<const uint8_t> data) override;
    void save(ByteWriter& out) const override;
    Status load(ByteReader& in) override;

    uint64_t bytes_written() const;

private:
    struct Regs {
        uint8_t ier = 0, lcr = 0, mcr = 0, scr = 0, fcr = 0, dll = 0x0c, dlm = 0;
    };
    bool dlab() const { return (regs_.lcr & 0x80) != 0; }

    Sink sink_;
    mutable std::mutex mutex_;
    Regs regs_;
    uint64_t tx_count_ = 0;
};

// Sinks: stdout (line-buffered) or an append-only file.
Serial::Sink stdout_sink();
Result<Serial::Sink> file_sink(const std::string& path);

}  // namespace vmm::devices

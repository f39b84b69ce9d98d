// ControlDevice: how a payload talks to the VMM (register map in control_abi.h). It reports
// progress, steps, results, errors and the longest pause it observed; it reads the host's
// real-time clock (so it can measure pauses it lives through, e.g. a migration's downtime);
// it asks to sleep or to end the machine.
// The device also times the gaps between a CPU's clock reads, as the guest sees them: the
// longest while a migration runs (before its switchover) and the one across the switchover
// (the source's last read before the pause to the destination's first after loading).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/devices/control_abi.h"
#include "vmm/devices/device.h"

namespace vmm::devices {

// What the payload reported; part of the device's saved state, so it survives migration.
struct GuestReport {
    uint64_t progress = 0;
    uint64_t steps = 0;
    uint64_t results = 0;
    uint64_t last_result = 0;
    uint64_t errors = 0;
    uint64_t last_error = 0;
    uint64_t max_pause_ns = 0;
    // From the guest's clock reads (0: none seen). The longest gap between two reads by one
    // CPU since the last migration started, up to its switchover; and the gap across the
    // switchover: the last read before the state was saved to the first after it was loaded.
    uint64_t migration_stall_ns = 0;
    uint64_t switchover_pause_ns = 0;
    // At a postcopy destination: the longest gap between two reads by one CPU while pages were
    // still missing (a vCPU waiting on one stalls its reads). Measured here, never saved.
    uint64_t postcopy_stall_ns = 0;
    std::string last_message;
    bool operator==(const GuestReport&) const = default;
};

// Host actions a command asks for; each runs on the vCPU thread that issued it.
struct ControlHooks {
    std::function<void(uint32_t cpu, uint64_t ns)> sleep;
    std::function<void(uint32_t code)> exit;
    std::function<void(uint64_t step)> step;
    std::function<void(std::string_view line)> message;
    std::function<uint64_t()> clock_ns;  // defaults to CLOCK_REALTIME
};

class ControlDevice final : public PioDevice {
public:
    static constexpr size_t kMaxCpus = 256;
    static constexpr size_t kMaxMessage = 200;

    explicit ControlDevice(ControlHooks hooks);

    std::string_view name() const override { return "control"; }
    void io_read(uint32_t cpu, uint16_t offset, std::span<uint8_t> data) override;
    void io_write(uint32_t cpu, uint16_t offset, std::span<const uint8_t> data) override;
    void save(ByteWriter& out) const override;
    Status load(ByteReader& in) override;

    GuestReport report() const;
    // A migration starts: the longest gap between clock reads is measured afresh from here.
    void start_migration_window();
    // A postcopy destination: open just before the guest runs here, closed once every page
    // has arrived; the gaps between clock reads in between are its postcopy stalls.
    void postcopy_window(bool open);

private:
    struct Latch {
        uint64_t arg = 0;
        uint64_t clock = 0;          // the last clock read (saved: the destination goes on from it)
        bool first_after_load = false;  // the next read spans the switchover
    };
    void clock_read(Latch& l, uint64_t now);
    void command(uint32_t cpu, uint32_t cmd);
    void message_byte(uint8_t b);

    ControlHooks hooks_;
    mutable std::mutex mutex_;
    std::vector<Latch> latches_;
    GuestReport report_;
    std::string line_;
    bool window_open_ = false;
    bool postcopy_open_ = false;
};

}  // namespace vmm::devices

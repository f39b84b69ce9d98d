#include "vmm/devices/control.h"

#include <time.h>

#include <algorithm>

namespace vmm::devices {

namespace {
constexpr uint8_t kControlStateVersion = 2;  // 2 added the gaps timed from the guest's clock reads

uint64_t realtime_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
}  // namespace

ControlDevice::ControlDevice(ControlHooks hooks) : hooks_(std::move(hooks)), latches_(kMaxCpus) {
    if (!hooks_.clock_ns) hooks_.clock_ns = realtime_ns;
}

void ControlDevice::io_read(uint32_t cpu, uint16_t offset, std::span<uint8_t> data) {
    std::lock_guard lock(mutex_);
    Latch& l = latches_[cpu % kMaxCpus];
    uint32_t v = 0xffffffffu;
    switch (offset) {
        case VMMC_REG_ID_CMD: v = VMMC_ID; break;
        case VMMC_REG_ARG_LO_CLOCK_LO:
            clock_read(l, hooks_.clock_ns());
            v = static_cast<uint32_t>(l.clock);
            break;
        case VMMC_REG_ARG_HI_CLOCK_HI: v = static_cast<uint32_t>(l.clock >> 32); break;
        default: break;
    }
    io_store(data, v);
}

void ControlDevice::clock_read(Latch& l, uint64_t now) {
    // A clock that went back (the destination's host clock behind the source's) gives no gap.
    uint64_t gap = l.clock != 0 && now > l.clock ? now - l.clock : 0;
    if (l.first_after_load) {
        l.first_after_load = false;
        report_.switchover_pause_ns = std::max(report_.switchover_pause_ns, gap);
    } else if (window_open_) {
        report_.migration_stall_ns = std::max(report_.migration_stall_ns, gap);
    } else if (postcopy_open_) {
        report_.postcopy_stall_ns = std::max(report_.postcopy_stall_ns, gap);
    }
    l.clock = now;
}

void ControlDevice::postcopy_window(bool open) {
    std::lock_guard lock(mutex_);
    postcopy_open_ = open;
}

void ControlDevice::start_migration_window() {
    std::lock_guard lock(mutex_);
    window_open_ = true;
    report_.migration_stall_ns = 0;
    report_.switchover_pause_ns = 0;
}

void ControlDevice::io_write(uint32_t cpu, uint16_t offset, std::span<const uint8_t> data) {
    uint32_t v = io_value(data);
    switch (offset) {
        case VMMC_REG_ID_CMD: command(cpu, v); return;
        case VMMC_REG_ARG_LO_CLOCK_LO: {
            std::lock_guard lock(mutex_);
            Latch& l = latches_[cpu % kMaxCpus];
            l.arg = (l.arg & 0xffffffff00000000ull) | v;
            return;
        }
        case VMMC_REG_ARG_HI_CLOCK_HI: {
            std::lock_guard lock(mutex_);
            Latch& l = latches_[cpu % kMaxCpus];
            l.arg = (l.arg & 0xffffffffull) | (uint64_t{v} << 32);
            return;
        }
        case VMMC_REG_MESSAGE: message_byte(static_cast<uint8_t>(v)); return;
        default: return;
    }
}

void ControlDevice::command(uint32_t cpu, uint32_t cmd) {
    std::unique_lock lock(mutex_);
    uint64_t arg = latches_[cpu % kMaxCpus].arg;
    switch (cmd) {
        case VMMC_CMD_PROGRESS: report_.progress = arg; return;
        case VMMC_CMD_STEP:
            report_.steps = arg;
            lock.unlock();
            if (hooks_.step) hooks_.step(arg);
            return;
        case VMMC_CMD_RESULT:
            ++report_.results;
            report_.last_result = arg;
            return;
        case VMMC_CMD_ERROR:
            ++report_.errors;
            report_.last_error = arg;
            return;
        case VMMC_CMD_MAX_PAUSE:
            if (arg > report_.max_pause_ns) report_.max_pause_ns = arg;
            return;
        case VMMC_CMD_SLEEP: {
            // The guest asked for this much of the gap to its next clock read (guest/pattern.c
            // counts only what a sleep overran); saturating, as ARG is the guest's.
            Latch& l = latches_[cpu % kMaxCpus];
            if (l.clock != 0) l.clock = arg > UINT64_MAX - l.clock ? UINT64_MAX : l.clock + arg;
            lock.unlock();
            if (hooks_.sleep) hooks_.sleep(cpu, arg);
            return;
        }
        case VMMC_CMD_EXIT:
            lock.unlock();
            if (hooks_.exit) hooks_.exit(static_cast<uint32_t>(arg));
            return;
        default: return;  // unknown commands are ignored, as hardware would
    }
}

void ControlDevice::message_byte(uint8_t b) {
    std::unique_lock lock(mutex_);
    if (b != '\n') {
        if (line_.size() < kMaxMessage) line_ += (b >= 0x20 && b < 0x7f) ? static_cast<char>(b) : '?';
        return;
    }
    report_.last_message = line_;
    std::string line = std::move(line_);
    line_.clear();
    lock.unlock();
    if (hooks_.message) hooks_.message(line);
}

GuestReport ControlDevice::report() const {
    std::lock_guard lock(mutex_);
    return report_;
}

void ControlDevice::save(ByteWriter& out) const {
    std::lock_guard lock(mutex_);
    out.put(kControlStateVersion);
    for (uint64_t v : {report_.progress, report_.steps, report_.results, report_.last_result, report_.errors,
                       report_.last_error, report_.max_pause_ns, report_.migration_stall_ns})
        out.put(v);
    out.put_string(report_.last_message);
    out.put_string(line_);
    out.put(static_cast<uint32_t>(latches_.size()));
    for (const Latch& l : latches_) {
        out.put(l.arg);
        out.put(l.clock);
    }
}

Status ControlDevice::load(ByteReader& in) {
    uint8_t version = 0;
    if (auto s = in.get(version); !s) return s;
    if (version != 1 && version != kControlStateVersion) {
        return Error("control state: unknown version " + std::to_string(version) + ": the source runs a newer vmm");
    }
    GuestReport r;
    for (uint64_t* p : {&r.progress, &r.steps, &r.results, &r.last_result, &r.errors, &r.last_error, &r.max_pause_ns})
        if (auto s = in.get(*p); !s) return s;
    if (version >= 2) {
        if (auto s = in.get(r.migration_stall_ns); !s) return s;
    }
    std::string line;
    if (auto s = in.get_string(r.last_message, kMaxMessage); !s) return s;
    if (auto s = in.get_string(line, kMaxMessage); !s) return s;
    uint32_t n = 0;
    if (auto s = in.get(n); !s) return s;
    if (n != kMaxCpus) return Error("control state: " + std::to_string(n) + " latches, expected " +
                                    std::to_string(kMaxCpus));
    std::vector<Latch> latches(n);
    for (Latch& l : latches) {
        if (auto s = in.get(l.arg); !s) return s;
        if (auto s = in.get(l.clock); !s) return s;
        l.first_after_load = l.clock != 0;
    }
    std::lock_guard lock(mutex_);
    window_open_ = false;
    r.postcopy_stall_ns = report_.postcopy_stall_ns;  // this side's, not the source's
    report_ = std::move(r);
    line_ = std::move(line);
    latches_ = std::move(latches);
    return {};
}

}  // namespace vmm::devices

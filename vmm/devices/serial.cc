#include "vmm/devices/serial.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "vmm/common/fd.h"

namespace vmm::devices {

namespace {
// Register offsets (DLAB=0 unless noted).
constexpr uint16_t kData = 0, kIer = 1, kIirFcr = 2, kLcr = 3, kMcr = 4, kLsr = 5, kMsr = 6, kScr = 7;
constexpr uint8_t kLsrThrEmpty = 0x20, kLsrTxIdle = 0x40;
constexpr uint8_t kIirNoInterrupt = 0x01;
constexpr uint8_t kSerialStateVersion = 1;
}  // namespace

void Serial::io_read(uint32_t /*cpu*/, uint16_t offset, std::span<uint8_t> data) {
    std::lock_guard lock(mutex_);
    uint8_t v = 0;
    switch (offset) {
        case kData: v = dlab() ? regs_.dll : 0; break;
        case kIer: v = dlab() ? regs_.dlm : regs_.ier; break;
        case kIirFcr: v = kIirNoInterrupt | ((regs_.fcr & 1) ? 0xc0 : 0); break;
        case kLcr: v = regs_.lcr; break;
        case kMcr: v = regs_.mcr; break;
        case kLsr: v = kLsrThrEmpty | kLsrTxIdle; break;
        case kMsr: v = 0xb0; break;  // CTS, DSR, DCD asserted
        case kScr: v = regs_.scr; break;
        default: break;
    }
    io_store(data, v);
}

void Serial::io_write(uint32_t /*cpu*/, uint16_t offset, std::span<const uint8_t> data) {
    auto v = static_cast<uint8_t>(io_value(data));
    std::unique_lock lock(mutex_);
    switch (offset) {
        case kData:
            if (dlab()) {
                regs_.dll = v;
            } else {
                ++tx_count_;
                lock.unlock();
                char c = static_cast<char>(v);
                if (sink_) sink_(std::string_view(&c, 1));
            }
            break;
        case kIer: (dlab() ? regs_.dlm : regs_.ier) = dlab() ? v : (v & 0x0f); break;
        case kIirFcr: regs_.fcr = v; break;
        case kLcr: regs_.lcr = v; break;
        case kMcr: regs_.mcr = v & 0x1f; break;
        case kScr: regs_.scr = v; break;
        default: break;
    }
}

uint64_t Serial::bytes_written() const {
    std::lock_guard lock(mutex_);
    return tx_count_;
}

void Serial::save(ByteWriter& out) const {
    std::lock_guard lock(mutex_);
    out.put(kSerialStateVersion);
    for (uint8_t b : {regs_.ier, regs_.lcr, regs_.mcr, regs_.scr, regs_.fcr, regs_.dll, regs_.dlm})
        out.put(b);
    out.put(tx_count_);
}

Status Serial::load(ByteReader& in) {
    uint8_t version = 0;
    if (auto s = in.get(version); !s) return s;
    if (version != kSerialStateVersion) return Error("serial0 state: unknown version " + std::to_string(version));
    Regs r;
    uint64_t count = 0;
    for (uint8_t* p : {&r.ier, &r.lcr, &r.mcr, &r.scr, &r.fcr, &r.dll, &r.dlm})
        if (auto s = in.get(*p); !s) return s;
    if (auto s = in.get(count); !s) return s;
    std::lock_guard lock(mutex_);
    regs_ = r;
    tx_count_ = count;
    return {};
}

Serial::Sink stdout_sink() {
    return [](std::string_view s) {
        std::fwrite(s.data(), 1, s.size(), stdout);
        if (s.find('\n') != std::string_view::npos) std::fflush(stdout);
    };
}

Result<Serial::Sink> file_sink(const std::string& path) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return Error::from_errno("open serial output file " + path);
    auto owner = std::make_shared<UniqueFd>(fd);
    return Serial::Sink([owner](std::string_view s) {
        // Best effort: a full disk must not stop the guest.
        [[maybe_unused]] auto n = ::write(owner->get(), s.data(), s.size());
    });
}

}  // namespace vmm::devices

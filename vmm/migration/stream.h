// ByteStream: the byte-stream half of a transport (the other half is the RAM channel).
// Blocking; every call either completes or fails with a reason (peer closed, silence timeout,
// cancelled, I/O error).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vmm/common/result.h"

namespace vmm::migration {

class ByteStream {
public:
    virtual ~ByteStream() = default;
    // Writes every byte of every buffer, in order (transports may gather them into one send).
    virtual Status write(std::span<const std::span<const uint8_t>> buffers) = 0;
    virtual Status flush() { return {}; }
    virtual Status read_exact(std::span<uint8_t> out) = 0;

    Status write(std::span<const uint8_t> data) {
        std::span<const uint8_t> one[] = {data};
        return write(std::span<const std::span<const uint8_t>>(one));
    }
};

// An in-memory stream: writes append to `out`, reads consume `in` (tests, fuzzing).
class MemoryStream final : public ByteStream {
public:
    explicit MemoryStream(std::vector<uint8_t> in = {}) : in_(std::move(in)) {}
    using ByteStream::write;
    Status write(std::span<const std::span<const uint8_t>> buffers) override;
    Status read_exact(std::span<uint8_t> out) override;
    const std::vector<uint8_t>& written() const { return out_; }
    size_t unread() const { return in_.size() - pos_; }

private:
    std::vector<uint8_t> in_;
    size_t pos_ = 0;
    std::vector<uint8_t> out_;
};

}  // namespace vmm::migration

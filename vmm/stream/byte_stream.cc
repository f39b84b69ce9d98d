#include "vmm/stream/byte_stream.h"

#include <cstring>

namespace vmm::stream {

Status MemoryStream::write(std::span<const std::span<const uint8_t>> buffers) {
    for (auto b : buffers) out_.insert(out_.end(), b.begin(), b.end());
    return {};
}

Status MemoryStream::read_exact(std::span<uint8_t> out) {
    if (out.size() > in_.size() - pos_) return Error("the migration stream ended early (truncated)");
    if (!out.empty()) std::memcpy(out.data(), in_.data() + pos_, out.size());
    pos_ += out.size();
    return {};
}

Status MemoryStream::unread(std::span<const uint8_t> bytes) {
    in_.insert(in_.begin() + static_cast<std::ptrdiff_t>(pos_), bytes.begin(), bytes.end());
    return {};
}

}  // namespace vmm::stream

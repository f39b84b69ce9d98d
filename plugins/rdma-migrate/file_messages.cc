#include "file_messages.h"

#include <algorithm>
#include <cstring>

namespace rdma_migrate {

namespace {
constexpr size_t kMaxPayload = kControlBufferSize - kHeaderSize;
}  // namespace

Status FileMessages::write(const void* data, size_t len) {
    auto* p = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), p, p + len);
    while (out_.size() >= kMaxPayload) {
        if (auto s = ctl_.exchange_send(encode_message(Command::qemu_file, 1, {out_.data(), kMaxPayload})); !s) return s;
        out_.erase(out_.begin(), out_.begin() + static_cast<long>(kMaxPayload));
    }
    return {};
}

Status FileMessages::flush() {
    if (out_.empty()) return {};
    auto s = ctl_.exchange_send(encode_message(Command::qemu_file, 1, out_));
    out_.clear();
    return s;
}

// A destination answers the source's RAM BLOCKS REQUEST here: the source sends it (ram_setup)
// once the destination has accepted the header, while the destination reads the stream, so both
// sides are set up (pin-all: pinned) before the first round, as QEMU does in its setup.
Status FileMessages::read(void* out, size_t len) {
    auto* p = static_cast<uint8_t*>(out);
    while (len > 0) {
        if (in_pos_ == in_.size()) {
            auto m = ctl_.exchange_recv({Command::qemu_file, Command::ram_blocks_request});
            if (!m) return m.error();
            if (m->header.type == Command::ram_blocks_request) {
                if (auto s = blocks_requested_(); !s) return s;
                continue;
            }
            in_ = std::move(m->data);
            in_pos_ = 0;
            continue;
        }
        size_t n = std::min(len, in_.size() - in_pos_);
        std::memcpy(p, in_.data() + in_pos_, n);
        in_pos_ += n;
        p += n;
        len -= n;
    }
    return {};
}

}  // namespace rdma_migrate

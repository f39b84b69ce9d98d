#include "control_tls.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace rdma_migrate {

namespace {
constexpr size_t kMaxPiece = kControlBufferSize - kHeaderSize;
}

Status ControlPipe::write(std::span<const std::span<const uint8_t>> buffers) {
    for (auto b : buffers) out_.insert(out_.end(), b.begin(), b.end());
    return {};
}

Status ControlPipe::send_pending(ControlChannel::Sent sent, int timeout_ms) {
    for (size_t at = 0; at < out_.size();) {
        size_t n = std::min(kMaxPiece, out_.size() - at);
        bool last = at + n == out_.size();
        auto msg = encode_message(Command::tls, 1, {out_.data() + at, n});
        if (auto s = ctl_.send_raw(msg, last ? sent : ControlChannel::Sent::wait, timeout_ms); !s) {
            out_.clear();
            return s;
        }
        at += n;
    }
    out_.clear();
    return {};
}

Status ControlPipe::read_exact(std::span<uint8_t> out) {
    while (!out.empty()) {
        if (in_pos_ == in_.size()) {
            auto m = ctl_.next_raw();
            if (!m) return m.error();
            if (m->header.type == Command::error) return ctl_.peer_aborted(*m);
            if (m->header.type != Command::tls) {
                return Error(fmt::format("RDMA control channel: a plaintext {} where only TLS records may come",
                                         to_string(m->header.type)));
            }
            in_ = std::move(m->data);
            in_pos_ = 0;
        }
        size_t n = std::min(out.size(), in_.size() - in_pos_);
        std::memcpy(out.data(), in_.data() + in_pos_, n);
        in_pos_ += n;
        out = out.subspan(n);
    }
    return {};
}

Status ControlPipe::await_readable(std::chrono::milliseconds within) {
    if (in_pos_ < in_.size()) return {};
    return ctl_.await_message(static_cast<int>(within.count()));
}

}  // namespace rdma_migrate

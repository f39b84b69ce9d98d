// Outbox: the writing end of one client connection. Replies (the client's own thread) and events
// (any thread) go through it one whole message at a time; once the connection closes, sends are
// dropped instead of reaching a descriptor that may have been reused.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>

#include "vmm/common/socket_io.h"

namespace vmmd {

class Outbox {
public:
    explicit Outbox(int fd) : fd_(fd) {}
    // false when the connection is closed or the send failed (the client then stops being served).
    bool send(std::span<const uint8_t> message) {
        std::lock_guard lock(mutex_);
        if (!open_) return false;
        if (!vmm::send_all(fd_, {reinterpret_cast<const char*>(message.data()), message.size()}, "a client")) open_ = false;
        return open_;
    }
    void close() {
        std::lock_guard lock(mutex_);
        open_ = false;
    }

private:
    std::mutex mutex_;
    int fd_;
    bool open_ = true;
};

}  // namespace vmmd

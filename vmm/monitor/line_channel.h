// LineChannel: text lines over a pair of file descriptors (a socket, or stdin/stdout), with a
// stop descriptor that wakes a blocked read so sessions end promptly at shutdown.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "vmm/common/result.h"

namespace vmm::monitor {

class LineChannel {
public:
    static constexpr size_t kMaxLine = 1 << 20;

    LineChannel(int in_fd, int out_fd, int stop_fd) : in_(in_fd), out_(out_fd), stop_(stop_fd) {}

    // The next line without its end-of-line; nullopt at end of input or on stop.
    Result<std::optional<std::string>> read_line();
    // Whole write or an error (a vanished peer is an error, never SIGPIPE).
    Status write(std::string_view text);

private:
    int in_, out_, stop_;
    std::string buffer_;
    std::mutex write_mutex_;
};

}  // namespace vmm::monitor

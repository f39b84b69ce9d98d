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
    LineChannel(int in_fd, int out_fd, int stop_fd, size_t max_line)
        : in_(in_fd), out_(out_fd), stop_(stop_fd), max_line_(max_line) {}

    // The next line without its end-of-line; nullopt at end of input or on stop. A line longer
    // than `max_line` is an error, and overlong() says so (the session answers, then closes).
    Result<std::optional<std::string>> read_line();
    bool overlong() const { return overlong_; }
    size_t max_line() const { return max_line_; }
    // Whole write or an error (a vanished peer is an error, never SIGPIPE).
    Status write(std::string_view text);

private:
    int in_, out_, stop_;
    size_t max_line_;
    bool overlong_ = false;
    std::string buffer_;
    std::mutex write_mutex_;
};

}  // namespace vmm::monitor

#include "vmm/monitor/line_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

namespace vmm::monitor {

Result<std::optional<std::string>> LineChannel::read_line() {
    for (;;) {
        size_t nl = buffer_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            if (!line.empty() && line.back() == '\r') line.pop_back();
            return std::optional<std::string>(std::move(line));
        }
        if (buffer_.size() > max_line_) {
            overlong_ = true;
            return Error(fmt::format("a request line longer than {} bytes", max_line_));
        }
        pollfd fds[2] = {{in_, POLLIN, 0}, {stop_, POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return Error::from_errno("poll on monitor input");
        }
        if (fds[1].revents != 0) return std::optional<std::string>{};
        char chunk[4096];
        ssize_t n = ::read(in_, chunk, sizeof(chunk));
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n < 0) return Error::from_errno("read monitor input");
        if (n == 0) return std::optional<std::string>{};
        buffer_.append(chunk, static_cast<size_t>(n));
    }
}

Status LineChannel::write(std::string_view text) {
    std::lock_guard lock(write_mutex_);
    struct stat st{};
    bool socket = ::fstat(out_, &st) == 0 && S_ISSOCK(st.st_mode);
    while (!text.empty()) {
        ssize_t n = socket ? ::send(out_, text.data(), text.size(), MSG_NOSIGNAL)
                           : ::write(out_, text.data(), text.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Error::from_errno("write to monitor client");
        text.remove_prefix(static_cast<size_t>(n));
    }
    return {};
}

}  // namespace vmm::monitor

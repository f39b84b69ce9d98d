#include "vmm/common/socket_io.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace vmm {

Status send_all(int fd, std::string_view bytes, const std::string& peer) {
    size_t done = 0;
    while (done < bytes.size()) {
        ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Error::from_errno("send to " + peer);
        done += static_cast<size_t>(n);
    }
    return {};
}

Result<bool> readable_within(int fd, std::chrono::milliseconds timeout, const std::string& peer) {
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return Error::from_errno("poll on the socket of " + peer);
        return r > 0;
    }
}

}  // namespace vmm

#include "tests/support/pipe_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace vmm::test {

namespace {

std::pair<UniqueFd, UniqueFd> make_pipe() {
    int p[2] = {-1, -1};
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return {};
    return {UniqueFd(p[0]), UniqueFd(p[1])};
}

}  // namespace

PipeStream::PipeStream(UniqueFd read_fd, UniqueFd write_fd, const stream::CancelToken* cancel)
    : read_(std::move(read_fd)), write_(std::move(write_fd)), cancel_(cancel) {
    std::tie(wake_read_, wake_write_) = make_pipe();
}

Status PipeStream::wait(int fd, short events, int timeout_ms) {
    pollfd fds[3] = {{fd, events, 0}, {wake_read_.get(), POLLIN, 0}, {cancel_ != nullptr ? cancel_->fd() : -1, POLLIN, 0}};
    for (;;) {
        int r = ::poll(fds, 3, timeout_ms);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return Error::from_errno("pipe stream: poll");
        if (fds[1].revents != 0) return Error("pipe stream: cut (shutdown)");
        if (fds[2].revents != 0) return Error("pipe stream: cancelled");
        if (r == 0) return Error("pipe stream: silent");
        return {};
    }
}

Status PipeStream::write(std::span<const std::span<const uint8_t>> buffers) {
    if (cut_) return Error("pipe stream: cut (shutdown)");
    for (auto b : buffers) {
        while (!b.empty()) {
            ssize_t n = ::write(write_.get(), b.data(), b.size());
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                if (auto s = wait(write_.get(), POLLOUT, -1); !s) return s;
                continue;
            }
            if (n <= 0) return Error::from_errno("pipe stream: write");
            b = b.subspan(static_cast<size_t>(n));
        }
    }
    return {};
}

Status PipeStream::read_exact(std::span<uint8_t> out) {
    if (cut_) return Error("pipe stream: cut (shutdown)");
    size_t take = std::min(out.size(), pushed_back_.size());
    std::copy_n(pushed_back_.begin(), take, out.begin());
    pushed_back_.erase(pushed_back_.begin(), pushed_back_.begin() + static_cast<std::ptrdiff_t>(take));
    out = out.subspan(take);
    while (!out.empty()) {
        ssize_t n = ::read(read_.get(), out.data(), out.size());
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (auto s = wait(read_.get(), POLLIN, -1); !s) return s;
            continue;
        }
        if (n < 0) return Error::from_errno("pipe stream: read");
        if (n == 0) return Error("pipe stream: the peer closed it");
        out = out.subspan(static_cast<size_t>(n));
    }
    return {};
}

Status PipeStream::await_readable(std::chrono::milliseconds within) {
    if (!pushed_back_.empty()) return {};
    return wait(read_.get(), POLLIN, static_cast<int>(within.count()));
}

Status PipeStream::unread(std::span<const uint8_t> bytes) {
    pushed_back_.insert(pushed_back_.begin(), bytes.begin(), bytes.end());
    return {};
}

Status PipeStream::shutdown() {
    cut_ = true;
    uint8_t one = 1;
    if (::write(wake_write_.get(), &one, 1) != 1) return Error::from_errno("pipe stream: shutdown");
    return {};
}

PipeConnection pipe_connection(const stream::CancelToken* source_cancel, const stream::CancelToken* dest_cancel) {
    auto [to_source_read, to_source_write] = make_pipe();
    auto [to_dest_read, to_dest_write] = make_pipe();
    PipeConnection c;
    c.to_source = UniqueFd(::fcntl(to_source_write.get(), F_DUPFD_CLOEXEC, 0));
    c.source = std::make_unique<PipeStream>(std::move(to_source_read), std::move(to_dest_write), source_cancel);
    c.dest = std::make_unique<PipeStream>(std::move(to_dest_read), std::move(to_source_write), dest_cancel);
    return c;
}

std::pair<std::unique_ptr<stream::ByteStream>, std::unique_ptr<stream::ByteStream>> pipe_stream_pair(
    const stream::CancelToken* source_cancel, const stream::CancelToken* dest_cancel) {
    auto c = pipe_connection(source_cancel, dest_cancel);
    return {std::move(c.source), std::move(c.dest)};
}

}  // namespace vmm::test

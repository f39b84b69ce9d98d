#include "vmm/stream/socket_stream.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstring>

#include "vmm/stream/kernel_tls.h"

namespace vmm::stream {

namespace {
constexpr size_t kBuffer = 64 * 1024;
constexpr size_t kMaxIov = 64;
constexpr size_t kSpliceMin = 64 * 1024;  // below this, copying is cheaper than two syscalls
constexpr int kPipeSize = 1 << 20;        // the default pipe-max-size: 256 pages per splice

// splice(2) has no MSG_NOSIGNAL: a vanished peer would raise SIGPIPE. vmm ignores SIGPIPE;
// a program that does not keeps the copying path.
bool sigpipe_ignored() {
    struct sigaction sa{};
    return ::sigaction(SIGPIPE, nullptr, &sa) == 0 && sa.sa_handler == SIG_IGN;
}
}  // namespace

SocketStream::SocketStream(UniqueFd fd, const CancelToken& cancel, std::chrono::milliseconds io_timeout, std::string peer,
                           bool zero_copy, SocketWords words)
    : fd_(std::move(fd)), cancel_(cancel), timeout_(io_timeout), peer_(std::move(peer)), words_(std::move(words)),
      splice_ok_(zero_copy && sigpipe_ignored()) {
    wbuf_.reserve(kBuffer);
}

Status SocketStream::wait(Wait what, std::chrono::milliseconds timeout, const std::string& setting) {
    pollfd fds[2] = {{fd_.get(), static_cast<short>(what == Wait::readable ? POLLIN : POLLOUT), 0},
                     {cancel_.fd(), POLLIN, 0}};
    for (;;) {
        int r = ::poll(fds, 2, static_cast<int>(timeout.count()));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return Error::from_errno(fmt::format("poll on the {} connection", words_.carries));
        if (fds[1].revents != 0 || cancel_.cancelled()) return Error(words_.cancelled);
        if (r == 0) {
            return lost(Error(fmt::format("{} was silent for {} ms: the peer is gone or stuck ({})", peer_, timeout.count(),
                                          setting)));
        }
        return {};
    }
}

Status SocketStream::await_readable(std::chrono::milliseconds within) {
    if (rpos_ < rbuf_.size()) return {};
    return wait(Wait::readable, within, words_.first_words_setting);
}

Status SocketStream::send_all(std::vector<std::span<const uint8_t>> parts) {
    size_t first = 0;
    while (first < parts.size()) {
        iovec iov[kMaxIov];
        size_t n = 0;
        for (size_t i = first; i < parts.size() && n < kMaxIov; ++i, ++n) {
            iov[n].iov_base = const_cast<uint8_t*>(parts[i].data());
            iov[n].iov_len = parts[i].size();
        }
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = n;
        ssize_t sent = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR) continue;
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (auto s = wait(Wait::writable); !s) return s;
            continue;
        }
        if (sent < 0) return lost(Error::from_errno("send to " + peer_));
        auto left = static_cast<size_t>(sent);
        while (first < parts.size() && left >= parts[first].size()) {
            left -= parts[first].size();
            ++first;
        }
        if (first < parts.size()) parts[first] = parts[first].subspan(left);
    }
    return {};
}

Status SocketStream::write(std::span<const std::span<const uint8_t>> buffers) {
    size_t total = 0;
    for (auto b : buffers) total += b.size();
    if (wbuf_.size() + total <= kBuffer) {
        for (auto b : buffers) wbuf_.insert(wbuf_.end(), b.begin(), b.end());
        return {};
    }
    std::vector<std::span<const uint8_t>> parts;
    parts.reserve(buffers.size() + 1);
    if (!wbuf_.empty()) parts.emplace_back(wbuf_.data(), wbuf_.size());
    for (auto b : buffers)
        if (!b.empty()) parts.push_back(b);
    auto s = send_all(std::move(parts));
    wbuf_.clear();
    return s;
}

Status SocketStream::flush() {
    if (wbuf_.empty()) return {};
    auto s = send_all({std::span<const uint8_t>(wbuf_.data(), wbuf_.size())});
    wbuf_.clear();
    return s;
}

Status SocketStream::write_ram(std::span<const uint8_t> header, std::span<const uint8_t> ram) {
    if (!splice_ok_ || ram.size() < kSpliceMin) return ByteStream::write_ram(header, ram);
    // The header goes out first (with whatever small records wait in the buffer), then the pages.
    if (auto s = write(header); !s) return s;
    if (auto s = flush(); !s) return s;
    std::span<const uint8_t> unsent;
    if (auto s = splice_ram(ram, unsent); !s) return s;
    if (unsent.empty()) return {};
    return send_all({unsent});
}

Status SocketStream::splice_ram(std::span<const uint8_t> ram, std::span<const uint8_t>& unsent) {
    if (!pipe_write_) {
        int p[2];
        if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {  // out of fds or pipe quota: copy instead
            splice_ok_ = false;
            unsent = ram;
            return {};
        }
        pipe_read_.reset(p[0]);
        pipe_write_.reset(p[1]);
        int size = ::fcntl(p[1], F_SETPIPE_SZ, kPipeSize);
        if (size <= 0) size = ::fcntl(p[1], F_GETPIPE_SZ);
        pipe_size_ = size > 0 ? static_cast<size_t>(size) : 64 * 1024;
    }
    size_t done = 0;
    while (done < ram.size()) {
        // The pipe is empty here (every splice below drains it), so this never blocks.
        iovec iov{const_cast<uint8_t*>(ram.data() + done), std::min(pipe_size_, ram.size() - done)};
        ssize_t in = ::vmsplice(pipe_write_.get(), &iov, 1, SPLICE_F_NONBLOCK);
        if (in < 0 && errno == EINTR) continue;
        auto moved = in > 0 ? splice_out(static_cast<size_t>(in), done + static_cast<size_t>(in) < ram.size())
                            : Result<size_t>(size_t{0});
        if (!moved) return moved.error();
        if (in <= 0 || *moved < static_cast<size_t>(in)) {
            // Refused (a kernel or socket without splicing): what the pipe holds is only
            // references to guest pages, so it is dropped and the rest goes by sendmsg.
            splice_ok_ = false;
            pipe_read_.reset();
            pipe_write_.reset();
            unsent = ram.subspan(done + (in > 0 ? *moved : 0));
            return {};
        }
        done += static_cast<size_t>(in);
    }
    return {};
}

Result<size_t> SocketStream::splice_out(size_t n, bool more) {
    unsigned flags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK | (more ? SPLICE_F_MORE : 0u);
    size_t moved = 0;
    while (moved < n) {
        ssize_t out = ::splice(pipe_read_.get(), nullptr, fd_.get(), nullptr, n - moved, flags);
        if (out < 0 && errno == EINTR) continue;
        if (out < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (auto s = wait(Wait::writable); !s) return s.error();
            continue;
        }
        if (out < 0 && !spliced_any_ && (errno == EINVAL || errno == EOPNOTSUPP)) return moved;
        if (out < 0) return lost(Error::from_errno("send to " + peer_));
        if (out == 0) return lost(Error(fmt::format("{} closed the connection in the middle of the {}", peer_, words_.carries)));
        spliced_any_ = true;
        moved += static_cast<size_t>(out);
    }
    return moved;
}

Status SocketStream::unread(std::span<const uint8_t> bytes) {
    rbuf_.insert(rbuf_.begin() + static_cast<std::ptrdiff_t>(rpos_), bytes.begin(), bytes.end());
    return {};
}

Status SocketStream::shutdown() {
    if (::shutdown(fd_.get(), SHUT_RDWR) != 0) return Error::from_errno(fmt::format("cutting the connection to {} (shutdown)", peer_));
    return {};
}

KernelTlsSender* SocketStream::kernel_tls() {
    int domain = 0;
    socklen_t len = sizeof domain;
    if (::getsockopt(fd_.get(), SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || (domain != AF_INET && domain != AF_INET6))
        return nullptr;  // the kernel's TLS runs over TCP only
    return this;
}

Result<bool> SocketStream::kernel_tls_start(const KernelTlsKeys& keys) {
    if (!kernel_tls_support().available) return false;
    if (auto s = flush(); !s) return s.error();  // what was written before goes as it was
    if (auto s = kernel_tls_send(fd_.get(), keys); !s) return s.error().context(peer_);
    return true;
}

Result<uint64_t> SocketStream::kernel_tls_records() { return kernel_tls_sent_records(fd_.get()); }

Status SocketStream::kernel_tls_renew(const KernelTlsKeys& next) {
    if (auto s = flush(); !s) return s;
    return kernel_tls_key_update(fd_.get(), next, [this] { return wait(Wait::writable); });
}

Status SocketStream::read_exact(std::span<uint8_t> out) {
    size_t done = 0;
    // Serve from the buffer first.
    size_t have = rbuf_.size() - rpos_;
    if (have > 0) {
        size_t n = std::min(have, out.size());
        std::memcpy(out.data(), rbuf_.data() + rpos_, n);
        rpos_ += n;
        done = n;
    }
    while (done < out.size()) {
        size_t want = out.size() - done;
        // Small reads refill the buffer; large ones (pages) go straight into the destination.
        bool buffered = want < kBuffer / 4;
        uint8_t* dst = buffered ? nullptr : out.data() + done;
        if (buffered) {
            rbuf_.resize(kBuffer);
            rpos_ = 0;
        }
        ssize_t n = ::recv(fd_.get(), buffered ? rbuf_.data() : dst, buffered ? kBuffer : want, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (buffered) rbuf_.clear();
            if (auto s = wait(Wait::readable); !s) return s;
            continue;
        }
        if (n < 0) return lost(Error::from_errno("receive from " + peer_));
        if (n == 0) {
            if (buffered) rbuf_.clear();
            return lost(Error(fmt::format("{} closed the connection in the middle of the {}", peer_, words_.carries)));
        }
        if (buffered) {
            rbuf_.resize(static_cast<size_t>(n));
            size_t take = std::min(rbuf_.size(), want);
            std::memcpy(out.data() + done, rbuf_.data(), take);
            rpos_ = take;
            done += take;
        } else {
            done += static_cast<size_t>(n);
        }
    }
    return {};
}

bool peer_on_this_host(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) < 0) return false;
    if (ss.ss_family == AF_UNIX) return true;
    if (ss.ss_family == AF_INET) {
        return (ntohl(reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss.ss_family == AF_INET6) {
        const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
    }
    return false;
}

}  // namespace vmm::stream

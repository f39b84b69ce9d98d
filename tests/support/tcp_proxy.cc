#include "tests/support/tcp_proxy.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/vm_pair.h"

namespace vmm::test {

TcpProxy::TcpProxy(uint16_t target) : target_(target) {
    listener_ = tcp_listener(port_);
    stop_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    thread_ = std::thread([this] { loop(); });
}

TcpProxy::~TcpProxy() {
    uint64_t one = 1;
    (void)::write(stop_.get(), &one, sizeof one);
    thread_.join();
}

void TcpProxy::cut() {
    std::lock_guard lock(mutex_);
    cut_ = true;
    for (auto& p : pairs_) {
        ::shutdown(p.a.get(), SHUT_RDWR);
        ::shutdown(p.b.get(), SHUT_RDWR);
    }
}

bool TcpProxy::cut_one(int number) {
    std::lock_guard lock(mutex_);
    for (auto& p : pairs_) {
        if (p.number != number) continue;
        ::shutdown(p.a.get(), SHUT_RDWR);
        ::shutdown(p.b.get(), SHUT_RDWR);
        return true;
    }
    return false;
}

void TcpProxy::mend() {
    std::lock_guard lock(mutex_);
    cut_ = false;
    mended_at_ = std::chrono::steady_clock::now();
    forwarded_since_mend_ = 0;
    flowing_.clear();
}

void TcpProxy::refuse_new() {
    std::lock_guard lock(mutex_);
    refuse_new_ = true;
}

double TcpProxy::ms_until_flowing(uint64_t bytes) const {
    std::lock_guard lock(mutex_);
    for (const auto& [n, ms] : flowing_)
        if (n >= bytes) return ms;
    return -1;
}

int TcpProxy::connections() const {
    std::lock_guard lock(mutex_);
    return accepted_;
}

// Copies what is readable on `from` to `to`: the bytes, or <= 0 when either end is done.
ssize_t TcpProxy::forward(int from, int to) {
    char buf[65536];
    ssize_t n = ::read(from, buf, sizeof buf);
    if (n <= 0) return -1;
    for (ssize_t off = 0; off < n;) {
        ssize_t w = ::send(to, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
        if (w <= 0) return -1;
        off += w;
    }
    return n;
}

void TcpProxy::loop() {
    for (;;) {
        std::vector<pollfd> fds = {{stop_.get(), POLLIN, 0}, {listener_.get(), POLLIN, 0}};
        {
            std::lock_guard lock(mutex_);
            for (const auto& p : pairs_) {
                fds.push_back({p.a.get(), POLLIN, 0});
                fds.push_back({p.b.get(), POLLIN, 0});
            }
        }
        if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) return;
        if (fds[0].revents != 0) return;
        std::lock_guard lock(mutex_);
        if (fds[1].revents != 0) {
            UniqueFd in(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
            UniqueFd out = in && !cut_ && !refuse_new_ ? tcp_connect(target_) : UniqueFd();
            if (out) {
                pairs_.push_back({std::move(in), std::move(out), mended_at_ != std::chrono::steady_clock::time_point{}, accepted_});
                ++accepted_;
            }
        }
        // A pair whose either side ended goes, closing the other (the pairs polled are the
        // first ones: only this thread removes any, and new ones go at the end).
        std::vector<bool> ended(pairs_.size(), false);
        for (size_t i = 2; i + 1 < fds.size(); i += 2) {
            Pair& p = pairs_[(i - 2) / 2];
            ssize_t ahead = fds[i].revents == 0 ? 0 : forward(p.a.get(), p.b.get());
            ssize_t back = ahead < 0 || fds[i + 1].revents == 0 ? 0 : forward(p.b.get(), p.a.get());
            ended[(i - 2) / 2] = ahead < 0 || back < 0;
            if (ahead > 0 && p.after_mend) {
                forwarded_since_mend_ += static_cast<uint64_t>(ahead);
                double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - mended_at_).count();
                if (flowing_.empty() || forwarded_since_mend_ >= flowing_.back().first * 2) flowing_.push_back({forwarded_since_mend_, ms});
            }
        }
        for (size_t i = pairs_.size(); i-- > 0;)
            if (ended[i]) pairs_.erase(pairs_.begin() + static_cast<ptrdiff_t>(i));
    }
}

}  // namespace vmm::test

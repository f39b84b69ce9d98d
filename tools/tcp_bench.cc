// vmm-tcpbench: this machine's raw loopback TCP throughput, the ceiling a TCP migration is
// compared with. A sender thread writes BYTES of incompressible data in 4 MiB sends.
//   vmm-tcpbench BYTES         from one 4 MiB buffer into another (what iperf measures:
//                              both buffers stay in cache)
//   vmm-tcpbench BYTES --cold  from a BYTES-sized buffer into a fresh BYTES-sized one, as a
//                              migration moves RAM (memory bandwidth and page population count)
// prints "bytes=N seconds=S MBps=M"
//   vmm-tcpbench --connect [N] N connections (50), each a connect, 64 bytes sent and 64 bytes
//                              answered: the least a TCP migration's setup (its connection and
//                              the destination's answer to its header) can cost here; prints
//                              "connects=N median_us=U p90_us=V max_us=W"
#include <netinet/in.h>
#include <sys/mman.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "vmm/common/fd.h"
#include "vmm/common/mapping.h"
#include "vmm/common/random_fill.h"
#include "vmm/common/socket_io.h"
#include "vmm/common/units.h"

namespace {

constexpr size_t kChunk = 4 << 20;

// A listening socket on 127.0.0.1 and an ephemeral port, written to `a`.
vmm::UniqueFd listen_loopback(sockaddr_in& a) {
    vmm::UniqueFd lfd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(lfd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(lfd.get(), 1) != 0 ||
        ::getsockname(lfd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        return vmm::UniqueFd();
    }
    return lfd;
}

std::vector<uint64_t> random_words(size_t bytes) {  // incompressible, as guest RAM in a benchmark
    std::vector<uint64_t> words(bytes / 8);
    uint64_t state = vmm::random_fill_state(1);
    vmm::fill_random(words, state);
    return words;
}

// Sends `bytes` to `to` in kChunk sends: from one buffer again and again, or (cold) through it.
void send_bytes(const sockaddr_in& to, const std::vector<uint64_t>& src, uint64_t bytes, bool cold) {
    vmm::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0) return;
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    uint64_t left = bytes;
    while (left > 0) {
        size_t n = left < kChunk ? left : kChunk;
        const char* from = reinterpret_cast<const char*>(src.data()) + (cold ? bytes - left : 0);
        ssize_t s = ::send(fd.get(), from, n, MSG_NOSIGNAL);
        if (s <= 0) return;
        left -= static_cast<uint64_t>(s);
    }
}

// Receives up to `bytes` into `dst` (into one chunk again and again unless cold); what arrived.
uint64_t receive_bytes(int fd, uint8_t* dst, uint64_t bytes, bool cold) {
    uint64_t got = 0;
    while (got < bytes) {
        uint8_t* to = dst + (cold ? got : 0);
        size_t want = cold ? std::min<uint64_t>(kChunk, bytes - got) : kChunk;
#ifdef MADV_POPULATE_WRITE
        if (cold && got % kChunk == 0) ::madvise(to, want, MADV_POPULATE_WRITE);
#endif
        ssize_t r = ::recv(fd, to, want, 0);
        if (r <= 0) break;
        got += static_cast<uint64_t>(r);
    }
    return got;
}

// 64 bytes each way over `fd`: sent then answered (the client), or answered (the server).
bool exchange(int fd, std::array<char, 64>& buf, bool send_first) {
    auto send = [&] { return static_cast<bool>(vmm::send_all(fd, {buf.data(), buf.size()}, "the peer")); };
    auto receive = [&] {
        for (size_t done = 0; done < buf.size();) {
            ssize_t r = ::recv(fd, buf.data() + done, buf.size() - done, 0);
            if (r <= 0) return false;
            done += static_cast<size_t>(r);
        }
        return true;
    };
    return send_first ? send() && receive() : receive() && send();
}

// One connection as the client: connect, send 64 bytes, read the 64-byte answer; its time in
// microseconds, or a negative number if it failed.
double one_connection(const sockaddr_in& to) {
    auto t0 = std::chrono::steady_clock::now();
    vmm::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0) return -1;
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::array<char, 64> buf{};
    if (!exchange(fd.get(), buf, true)) return -1;
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

int connect_bench(int n) {
    sockaddr_in a{};
    vmm::UniqueFd lfd = listen_loopback(a);
    if (!lfd) {
        std::perror("vmm-tcpbench: listen");
        return 1;
    }
    std::jthread server([&] {  // answers each connection's 64 bytes with 64 of its own
        for (int i = 0; i < n; ++i) {
            vmm::UniqueFd c(::accept(lfd.get(), nullptr, nullptr));
            std::array<char, 64> buf{};
            if (!c || !exchange(c.get(), buf, false)) return;
        }
    });
    std::vector<double> us;
    for (int i = 0; i < n; ++i) {
        double t = one_connection(a);
        if (t < 0) {
            std::perror("vmm-tcpbench: connection");
            ::shutdown(lfd.get(), SHUT_RDWR);  // wakes the server's accept
            return 1;
        }
        us.push_back(t);
    }
    server.join();
    std::sort(us.begin(), us.end());
    std::printf("connects=%d median_us=%.0f p90_us=%.0f max_us=%.0f\n", n, us[us.size() / 2], us[us.size() * 9 / 10],
                us.back());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 2 && std::strcmp(argv[1], "--connect") == 0) {
        int n = argc >= 3 ? std::atoi(argv[2]) : 50;
        if (n < 1 || n > 100000) {
            std::fprintf(stderr, "usage: vmm-tcpbench --connect [N], N in 1..100000\n");
            return 2;
        }
        return connect_bench(n);
    }
    bool cold = argc == 3 && std::strcmp(argv[2], "--cold") == 0;
    if (argc != 2 && !cold) {
        std::fprintf(stderr, "usage: vmm-tcpbench BYTES [--cold]\n");
        return 2;
    }
    auto total = vmm::parse_size(argv[1]);
    if (!total) {
        std::fprintf(stderr, "vmm-tcpbench: %s\n", total.error().message().c_str());
        return 2;
    }
    sockaddr_in a{};
    vmm::UniqueFd lfd = listen_loopback(a);
    if (!lfd) {
        std::perror("vmm-tcpbench: listen");
        return 1;
    }
    uint64_t bytes = *total;
    auto src = random_words(cold ? bytes : kChunk);
    // Declared before the accepted socket, so that on an early return the socket closes
    // first, the sender's send fails, and the join ends.
    std::jthread sender([&] { send_bytes(a, src, bytes, cold); });
    vmm::UniqueFd c(::accept(lfd.get(), nullptr, nullptr));
    auto dst = vmm::Mapping::map("receive buffer", cold ? bytes : kChunk, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
    if (!dst) {
        std::fprintf(stderr, "vmm-tcpbench: %s\n", dst.error().message().c_str());
        return 1;
    }
    // The same memory treatment vmm gives guest RAM: transparent huge pages, and each chunk
    // populated in one call before data is copied in.
    if (cold) ::madvise(dst->data(), bytes, MADV_HUGEPAGE);
    auto t0 = std::chrono::steady_clock::now();
    uint64_t got = receive_bytes(c.get(), dst->data(), bytes, cold);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sender.join();
    std::printf("bytes=%llu seconds=%.3f MBps=%.1f\n", static_cast<unsigned long long>(got), secs, got / secs / 1e6);
    return got == bytes ? 0 : 1;
}

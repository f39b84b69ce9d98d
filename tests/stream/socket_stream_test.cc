// SocketStream over real sockets: small writes, guest RAM sent by splicing (TCP) or by the
// fallback path, and reads of every size arrive byte for byte and in order.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <signal.h>
#include <fcntl.h>

#include <cstring>
#include <thread>

#include "tests/support/socket_pair.h"
#include "vmm/common/mapping.h"
#include "vmm/stream/socket_stream.h"

namespace vmm::stream {

namespace {
using namespace std::chrono_literals;

// Two connected non-blocking TCP sockets on loopback.
std::pair<UniqueFd, UniqueFd> tcp_pair() {
    UniqueFd l(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(::bind(l.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(l.get(), 1), 0);
    EXPECT_EQ(::getsockname(l.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    UniqueFd c(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_EQ(::connect(c.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    UniqueFd s(::accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    ::fcntl(c.get(), F_SETFL, O_NONBLOCK);
    return {std::move(c), std::move(s)};
}

using vmm::test::unix_pair;

// Writes: a small record, 9 MiB + 1 page of "RAM" by write_ram (more than one pipe's worth),
// a RAM run too small to splice, a tail; the reader takes it in odd-sized pieces.
// Returns whether the RAM went out by splicing.
bool round_trip(std::pair<UniqueFd, UniqueFd> fds) {
    auto cancel = CancelToken::create();
    EXPECT_TRUE(cancel);
    if (!cancel) return false;
    constexpr size_t kRam = (9 << 20) + 4096;
    auto ram = Mapping::map("test ram", kRam, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    EXPECT_TRUE(ram);
    if (!ram) return false;
    for (size_t i = 0; i < kRam; ++i) ram->data()[i] = static_cast<uint8_t>(i * 7 + i / 4096);
    std::vector<uint8_t> head{1, 2, 3}, tail{9, 8, 7, 6};
    SocketStream out(std::move(fds.first), *cancel, 10s, "reader");
    SocketStream in(std::move(fds.second), *cancel, 10s, "writer");
    Status wrote;
    std::thread writer([&] {
        wrote = out.write(head);
        if (wrote) wrote = out.write_ram(head, {ram->data(), kRam});
        if (wrote) wrote = out.write_ram(tail, {ram->data(), 4096});
        if (wrote) wrote = out.write(tail);
        if (wrote) wrote = out.flush();
    });
    std::vector<uint8_t> got(head.size() * 2 + kRam + tail.size() + 4096 + tail.size());
    size_t at = 0;
    Status read;
    for (size_t piece : {size_t{2}, size_t{3}, size_t{100000}, size_t{5 << 20}, got.size() - at}) {
        if (read) read = in.read_exact({got.data() + at, std::min(piece, got.size() - at)});
        at += std::min(piece, got.size() - at);
    }
    writer.join();
    EXPECT_TRUE(read) << read.error().message();
    EXPECT_TRUE(wrote) << wrote.error().message();
    std::vector<uint8_t> want(head.begin(), head.end());
    want.insert(want.end(), head.begin(), head.end());
    want.insert(want.end(), ram->data(), ram->data() + kRam);
    want.insert(want.end(), tail.begin(), tail.end());
    want.insert(want.end(), ram->data(), ram->data() + 4096);
    want.insert(want.end(), tail.begin(), tail.end());
    EXPECT_TRUE(got == want) << "the bytes read differ from the bytes written";
    return out.spliced();
}

using vmm::test::SigpipeIgnored;
}  // namespace

TEST(SocketStream, GuestRamSplicedOverTcpArrivesInOrder) {
    SigpipeIgnored ignored;
    EXPECT_TRUE(round_trip(tcp_pair())) << "RAM was copied, not spliced";
}

TEST(SocketStream, GuestRamOverAUnixSocketArrivesInOrder) {
    SigpipeIgnored ignored;
    round_trip(unix_pair());
}

TEST(SocketStream, WithoutSigpipeIgnoredRamIsCopiedNotSpliced) {
    auto old = ::signal(SIGPIPE, SIG_DFL);
    EXPECT_FALSE(round_trip(tcp_pair())) << "splicing could raise SIGPIPE in this process";
    ::signal(SIGPIPE, old);
}

TEST(SocketStream, APeerThatClosesEndsAWriteWithAReason) {
    SigpipeIgnored ignored;
    auto cancel = CancelToken::create();
    ASSERT_TRUE(cancel);
    auto fds = tcp_pair();
    fds.second.reset();
    auto ram = Mapping::map("test ram", 4 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    ASSERT_TRUE(ram);
    std::memset(ram->data(), 1, 4 << 20);
    SocketStream out(std::move(fds.first), *cancel, 10s, "the destination");
    Status s;
    for (int i = 0; i < 64 && s; ++i) s = out.write_ram({}, {ram->data(), 4 << 20});
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message().find("the destination"), std::string::npos) << s.error().message();
}

}  // namespace vmm::stream

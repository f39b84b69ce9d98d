// Kernel TLS (x-tls-kernel) over a real loopback TCP connection: the client hands its sending
// side to the kernel after the handshake and GnuTLS on the other end reads what the kernel
// encrypted, written and spliced; the reverse direction stays GnuTLS's on both ends, its key
// updates read by a session whose own sending is the kernel's; a key update of the kernel's
// own is made where the kernel can (Linux 6.14) and refused in one line where it cannot; a unix
// socket keeps GnuTLS. Label ktls: where this kernel has no TLS (modprobe tls), the test command
// runs these in the nested VM, whose Debian kernel has it.
#include "vmm/stream/kernel_tls.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <future>
#include <thread>

#include "tests/support/require.h"
#include "tests/support/test_pki.h"
#include "tests/support/vm_pair.h"
#include "vmm/common/mapping.h"
#include "vmm/stream/socket_stream.h"
#include "vmm/stream/tls_stream.h"

namespace vmm::stream {
namespace {

constexpr auto kIo = std::chrono::milliseconds(20000);

// What is missing for the kernel's TLS, if anything (VMM_REQUIRE).
std::optional<std::string> kernel_tls() {
    if (kernel_tls_support().available) return std::nullopt;
    return "the kernel's TLS: " + kernel_tls_support().why + " (the nested VM's kernel has it)";
}

class KernelTlsTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        ::signal(SIGPIPE, SIG_IGN);  // as vmm does: a socket stream splices only then
        if (!need::certtool()) dir_ = pki_.make("good");
    }
    void SetUp() override {
        VMM_REQUIRE(need::certtool());
        ASSERT_FALSE(dir_.empty()) << "make-test-pki.sh failed";
        auto token = CancelToken::create();
        ASSERT_TRUE(token) << token.error().message();
        cancel_.emplace(std::move(*token));
    }
    TlsSetup setup(TlsRole role, bool kernel, uint64_t rekey) const {
        TlsSetup s;
        s.role = role;
        s.creds_dir = dir_;
        s.hostname = "localhost";
        s.rekey_records = rekey;
        s.kernel_send = kernel;
        return s;
    }
    // A connected pair of sockets (TCP on loopback, or unix), each a SocketStream, handshaken on
    // two threads: the client with x-tls-kernel, the server without.
    std::pair<std::unique_ptr<ByteStream>, std::unique_ptr<ByteStream>> connect(bool tcp, uint64_t rekey = uint64_t{1} << 24) {
        int fds[2] = {-1, -1};
        if (tcp) {
            uint16_t port = 0;
            UniqueFd l = test::tcp_listener(port);
            UniqueFd c = test::tcp_connect(port);
            EXPECT_TRUE(l && c) << "no loopback TCP connection";
            fds[1] = ::accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC);
            fds[0] = c.release();
        } else {
            EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        }
        auto stream = [this](int fd) {
            set_nonblocking(fd);
            return std::make_unique<SocketStream>(UniqueFd(fd), *cancel_, kIo, "the test's peer", true);
        };
        auto server = std::async(std::launch::async, [&, s = stream(fds[1])]() mutable {
            return tls_handshake(std::move(s), setup(TlsRole::server, false, rekey));
        });
        auto client = tls_handshake(stream(fds[0]), setup(TlsRole::client, true, rekey));
        auto served = server.get();
        EXPECT_TRUE(client) << client.error().message();
        EXPECT_TRUE(served) << served.error().message();
        if (!client || !served) return {};
        return {std::move(*client), std::move(*served)};
    }
    static void set_nonblocking(int fd) { ASSERT_EQ(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK), 0); }

    static inline test::TestPki pki_{"vmm-ktls-unit"};
    static inline std::string dir_;
    std::optional<CancelToken> cancel_;
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed + i / 4096);
    return v;
}

TEST_F(KernelTlsTest, TheKernelEncryptsWhatTheClientSendsWrittenAndSplicedAndGnuTlsReadsIt) {
    VMM_REQUIRE(kernel_tls());
    auto [client, server] = connect(true);
    ASSERT_TRUE(client && server);
    EXPECT_TRUE(tls_kernel_sends(*client));
    EXPECT_FALSE(tls_kernel_sends(*server));
    auto head = pattern(1 << 20, 1), header = pattern(24, 2);
    auto ram = Mapping::map("test ram", 4 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    ASSERT_TRUE(ram) << ram.error().message();
    auto fill = pattern(ram->size(), 3);
    std::copy(fill.begin(), fill.end(), ram->data());
    auto back = pattern(512 << 10, 4);
    std::thread source([&] {
        EXPECT_TRUE(client->write(head));
        EXPECT_TRUE(client->write_ram(header, {ram->data(), ram->size()}));  // guest RAM: spliced where it can be
        EXPECT_TRUE(client->flush());
    });
    std::vector<uint8_t> got_head(head.size()), got_header(header.size()), got_ram(ram->size());
    ASSERT_TRUE(server->read_exact(got_head));
    ASSERT_TRUE(server->read_exact(got_header));
    ASSERT_TRUE(server->read_exact(got_ram));
    source.join();
    EXPECT_EQ(got_head, head);
    EXPECT_EQ(got_header, header);
    EXPECT_EQ(got_ram, fill);
    // The return path: GnuTLS both ends.
    ASSERT_TRUE(server->write(back));
    ASSERT_TRUE(server->flush());
    std::vector<uint8_t> got_back(back.size());
    ASSERT_TRUE(client->read_exact(got_back));
    EXPECT_EQ(got_back, back);
}

TEST_F(KernelTlsTest, KeysAreRenewedInTheKernelWhereItCanAndTheRefusalIsOneLineWhereItCannot) {
    VMM_REQUIRE(kernel_tls());
    auto [client, server] = connect(true, 64);  // a new key every 64 records (1 MiB)
    ASSERT_TRUE(client && server);
    // The server renews its own (GnuTLS) key as it sends: the client, whose sending is the
    // kernel's, reads its KeyUpdates as any GnuTLS session does.
    auto down = pattern(4 << 20, 5);
    std::thread dest([&] {
        for (size_t at = 0; at < down.size(); at += 256 << 10) {
            EXPECT_TRUE(server->write(std::span<const uint8_t>(down).subspan(at, 256 << 10)));
            EXPECT_TRUE(server->flush());
            std::this_thread::sleep_for(std::chrono::milliseconds(60));  // KeyUpdates at most every 200 ms
        }
    });
    std::vector<uint8_t> got_down(down.size());
    ASSERT_TRUE(client->read_exact(got_down));
    dest.join();
    EXPECT_EQ(got_down, down);
    EXPECT_GE(tls_key_updates(*server), 1u);

    auto up = pattern(4 << 20, 6);
    std::vector<uint8_t> got_up(up.size());
    auto reader = std::async(std::launch::async, [&] { return server->read_exact(got_up); });
    Status sent;
    for (size_t at = 0; sent && at < up.size(); at += 256 << 10) {
        sent = client->write(std::span<const uint8_t>(up).subspan(at, 256 << 10));
        if (sent) sent = client->flush();
        std::this_thread::sleep_for(std::chrono::milliseconds(60));
    }
    if (kernel_tls_support().renews) {
        ASSERT_TRUE(sent) << sent.error().message();
        ASSERT_TRUE(reader.get());
        EXPECT_EQ(got_up, up);
        EXPECT_GE(tls_key_updates(*client), 1u);
    } else {
        ASSERT_FALSE(sent) << "a kernel that cannot renew a key sent past x-tls-rekey-records";
        EXPECT_NE(sent.error().message().find("cannot renew a sending key (Linux 6.14 can)"), std::string::npos)
            << sent.error().message();
        EXPECT_EQ(sent.error().message().find('\n'), std::string::npos);
        (void)server->shutdown();
        (void)reader.get();
    }
}

TEST_F(KernelTlsTest, AUnixSocketKeepsGnuTls) {
    auto [client, server] = connect(false);
    ASSERT_TRUE(client && server);
    EXPECT_FALSE(tls_kernel_sends(*client));
    auto up = pattern(2 << 20, 7);
    std::thread source([&] {
        EXPECT_TRUE(client->write(up));
        EXPECT_TRUE(client->flush());
    });
    std::vector<uint8_t> got(up.size());
    ASSERT_TRUE(server->read_exact(got));
    source.join();
    EXPECT_EQ(got, up);
}

}  // namespace
}  // namespace vmm::stream

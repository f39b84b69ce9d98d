// Malformed streams sent to `vmm --incoming`: each is refused with one clear line and a
// non-zero exit, never a crash, and the refusal reaches the sender.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/require.h"
#include "tests/support/kvm_fixture.h"
#include "tests/support/vm_pair.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::test {

using namespace migration;

namespace {

std::vector<uint8_t> operator+(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

std::vector<uint8_t> good_header() {
    StreamHeader h;
    h.vcpu_count = 1;
    h.blocks = {{"pc.ram", 0, 64ull << 20}};
    return encode_header(h);
}

std::vector<uint8_t> rec(Record r) { return encode_record(r); }

// Connects, sends `bytes`, half-closes, and returns what the destination answered.
std::string send_stream(uint16_t port, const std::vector<uint8_t>& bytes) {
    int fd = -1;
    for (int i = 0; i < 100 && fd < 0; ++i) {
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
            ::close(fd);
            fd = -1;
            ::usleep(100000);
        }
    }
    if (fd < 0) return "(could not connect)";
    [[maybe_unused]] auto n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
    std::string reply;
    char buf[4096];
    ssize_t r;
    while ((r = ::recv(fd, buf, sizeof(buf), 0)) > 0) reply.append(buf, static_cast<size_t>(r));
    ::close(fd);
    return reply;
}

struct Malformed {
    const char* name;
    std::vector<uint8_t> bytes;
    const char* error;  // the destination's one line, after "incoming migration failed: "
    bool answered = true;  // the sender gets REFUSED(error) back; a foreign stream's cannot read it
};

}  // namespace

TEST(MalformedStream, EachIsRefusedWithAClearErrorAndNoCrash) {
    VMM_REQUIRE(need::kvm());
    auto bad_version = good_header();
    bad_version[8] = 9;
    auto truncated = good_header();
    truncated.resize(truncated.size() - 3);
    auto round = rec({RecordType::round_begin, 0, 0, 0, 0});
    const Malformed cases[] = {
        {"bad version", bad_version, "migration stream version 9 is not supported"},
        {"truncated header", truncated, "the migration source closed the connection in the middle of the migration"},
        {"page outside a block", good_header() + round + rec({RecordType::pages, 0, 64ull << 20, 4096, 0}),
         "migration stream: range 0x4000000+0x1000 lies outside RAM block 'pc.ram' (64 MiB)"},
        {"oversized length", good_header() + round + rec({RecordType::pages, 0, 0, 1ull << 30, 0}),
         "migration stream: PAGES record of 1073741824 bytes exceeds 4194304"},
        {"block index", good_header() + round + rec({RecordType::zero, 7, 0, 4096, 0}),
         "migration stream: RAM block index 7 (there are 1)"},
        {"truncated pages", good_header() + round + rec({RecordType::pages, 0, 0, 8192, 0}) + std::vector<uint8_t>(100, 1),
         "the migration source closed the connection in the middle of the migration"},
        {"garbage record", good_header() + std::vector<uint8_t>{0xee}, "migration stream: unknown record type 0xee"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        uint16_t port = free_tcp_port();
        auto dst = Vm::start("bad-dst", {"-m", "64M", "--smp", "1", "--incoming", "tcp:127.0.0.1:" + std::to_string(port)});
        ASSERT_TRUE(dst);
        std::string reply = send_stream(port, c.bytes);
        dst->forget_monitor();
        auto code = dst->process().wait(std::chrono::seconds(30));
        EXPECT_EQ(code, std::optional<int>(1)) << dst->log();
        std::string log = dst->log();
        EXPECT_NE(log.find(std::string("vmm: error: incoming migration failed: ") + c.error), std::string::npos) << log;
        bool closed_early = std::string(c.error).find("closed the connection") != std::string::npos;
        if (!closed_early && c.answered) {
            EXPECT_NE(reply.find(c.error), std::string::npos) << "the sender was not told why";
        }
        if (!c.answered) {
            EXPECT_EQ(reply, "") << "a sender whose stream is not vmm's was answered in vmm's";
        }
    }
}

// A connection that does not begin as a source does (a port scan that opens and closes, garbage,
// a health check's HTTP request, a stream that is not vmm's, QEMU's) is dropped with a warning
// naming what it was, the destination keeps waiting, and the real source then migrates into it.
TEST(MalformedStream, AStrayConnectionIsDroppedAndTheRealSourceFollows) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    std::string uri = "tcp:127.0.0.1:" + std::to_string(port);
    auto dst = Vm::start("stray-dst", {"-m", "64M", "--smp", "1", "-S", "--incoming", uri});
    ASSERT_TRUE(dst);
    auto bad_magic = good_header();
    bad_magic[1] = 'X';
    std::string http = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    const Malformed strays[] = {
        {"opened and closed", {}, "it closed before saying 8 bytes", false},
        {"16 bytes of garbage", std::vector<uint8_t>(16, 0xa5), "this is not a vmm migration stream (bad magic)", false},
        {"an HTTP request", std::vector<uint8_t>(http.begin(), http.end()), "this is not a vmm migration stream (bad magic)", false},
        {"bad magic", bad_magic, "this is not a vmm migration stream (bad magic)", false},
        // What a QEMU source sends first: QEMU_VM_FILE_MAGIC, QEMU_VM_FILE_VERSION, a configuration section.
        {"QEMU's stream", {'Q', 'E', 'V', 'M', 0, 0, 0, 3, 7, 0, 0, 0, 13, 'c', 'o', 'n', 'f', 'i', 'g'},
         "the source sent QEMU's migration stream (magic QEVM, version 3)", false},
    };
    auto drops = [&] {
        std::string log = dst->log();
        size_t n = 0;
        for (size_t at = log.find("dropped a connection that is not a migration"); at != std::string::npos;
             at = log.find("dropped a connection that is not a migration", at + 1))
            ++n;
        return n;
    };
    size_t dropped = 0;
    for (const auto& c : strays) {
        SCOPED_TRACE(c.name);
        EXPECT_EQ(send_stream(port, c.bytes), "") << "a stray connection was answered in vmm's words";
        ++dropped;
        ASSERT_TRUE(eventually([&] { return drops() >= dropped; }, 30))
            << dst->log();
        EXPECT_NE(dst->log().find(c.error), std::string::npos) << dst->log();
        EXPECT_FALSE(dst->process().wait(std::chrono::milliseconds(0))) << "the destination ended:\n" << dst->log();
    }
    auto src = Vm::start("stray-src", {"-m", "64M", "--smp", "1", "--guest", "pattern", "--append", "bytes=4M"});
    ASSERT_TRUE(src);
    EXPECT_EQ(src->cmd("migrate -d " + uri), "");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "completed" || src->migrate_status() == "failed"; }, 120))
        << src->cmd("info migrate");
    EXPECT_EQ(src->migrate_status(), "completed") << src->cmd("info migrate") << dst->log();
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 60)) << dst->cmd("info migrate");
    expect_handover(*src, *dst);
}

}  // namespace vmm::test

// verify-ram end to end: a proxy between two real vmm processes flips one byte of the stream
// on its way. With verification (the default) the destination refuses the migration naming the
// block and offset, and the source runs on; without it, the same flip lands silently, which is
// what this capability exists to stop.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <thread>

#include "tests/support/require.h"
#include "tests/support/kvm_fixture.h"
#include "tests/support/vm_pair.h"

namespace vmm::test {

namespace {

// Forwards every connection to `to_port`; in the source-to-destination direction of
// connection number `victim` (0: the first), the byte at `flip_at` is inverted.
class FlippingProxy {
public:
    FlippingProxy(uint16_t to_port, int victim, uint64_t flip_at) : to_(to_port), victim_(victim), flip_at_(flip_at) {
        listen_ = tcp_listener(port_);
        acceptor_ = std::thread([this] { accept_loop(); });
    }
    ~FlippingProxy() {
        stop_ = true;
        acceptor_.join();
        for (auto& t : pumps_) t.join();
    }
    uint16_t port() const { return port_; }
    bool flipped() const { return flipped_; }

private:
    void accept_loop() {
        for (int n = 0; !stop_;) {
            pollfd p{listen_.get(), POLLIN, 0};
            if (::poll(&p, 1, 100) <= 0) continue;
            auto in = std::make_shared<UniqueFd>(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
            auto out = std::make_shared<UniqueFd>(tcp_connect(to_));
            bool victim = n++ == victim_;
            pumps_.emplace_back([this, in, out, victim] { pump(in->get(), out->get(), victim ? flip_at_ : UINT64_MAX); });
            pumps_.emplace_back([this, in, out] { pump(out->get(), in->get(), UINT64_MAX); });
        }
    }
    void pump(int from, int to, uint64_t flip_at) {
        uint64_t seen = 0;
        char buf[65536];
        while (!stop_) {
            pollfd p{from, POLLIN, 0};
            if (::poll(&p, 1, 100) <= 0) continue;
            ssize_t n = ::read(from, buf, sizeof(buf));
            if (n <= 0) break;
            if (flip_at >= seen && flip_at < seen + static_cast<uint64_t>(n)) {
                buf[flip_at - seen] = static_cast<char>(~buf[flip_at - seen]);
                flipped_ = true;
            }
            seen += static_cast<uint64_t>(n);
            for (ssize_t done = 0; done < n;) {
                ssize_t w = ::send(to, buf + done, static_cast<size_t>(n - done), MSG_NOSIGNAL);
                if (w <= 0) return;
                done += w;
            }
        }
        ::shutdown(to, SHUT_WR);
    }

    uint16_t to_, port_ = 0;
    int victim_;
    uint64_t flip_at_;
    UniqueFd listen_;
    std::atomic<bool> stop_{false}, flipped_{false};
    std::thread acceptor_;
    std::vector<std::thread> pumps_;
};

// A guest whose first 32 MiB the host filled with random bytes, migrated through the proxy.
struct Outcome {
    std::string out, src_status, src_hash, dst_log;
    std::optional<std::string> dst_hash;
};

// `scheme`: tcp, or loop (the test plugin, whose RAM channel the core sums after each round, or
// which carries the sums itself with `cap` loop-sums).
Outcome migrate_through_flip(const std::string& name, bool verify, bool multifd, const std::string& scheme = "tcp",
                             const std::string& cap = "") {
    uint16_t port = free_tcp_port();
    auto uri = [&scheme](uint16_t p) { return local_uri(scheme, p); };
    auto src = Vm::start(name + "-src", {"--guest", "idle", "-m", "64M", "--smp", "1", "--prefill", "32M"});
    auto dst = destination(name + "-dst", uri(port), "64M", "1");
    if (!src || !dst) return {};
    // 12 MiB in: page data of the third 4 MiB record (headers and sums are a few KiB in all).
    FlippingProxy proxy(port, multifd ? 1 : 0, (12u << 20) + 12345);
    EXPECT_EQ(src->cmd(std::string("migrate_set_capability verify-ram ") + (verify ? "on" : "off")), "");
    if (multifd) {
        EXPECT_EQ(src->cmd("migrate_set_capability multifd on"), "");
    }
    if (!cap.empty()) {
        EXPECT_EQ(src->cmd("migrate_set_capability " + cap + " on"), "");
    }
    EXPECT_EQ(src->cmd("stop"), "");  // nothing dirty: one copy of each page, the flipped one too
    Outcome o;
    o.out = src->cmd("migrate " + uri(proxy.port()));
    EXPECT_TRUE(proxy.flipped()) << "the proxy never saw byte 12 MiB + 12345: " << o.out;
    o.src_status = src->status();
    o.src_hash = src->ramhash();
    if (o.out.find("Migration status: completed") != std::string::npos) o.dst_hash = dst->ramhash();
    o.dst_log = dst->log();
    return o;
}

void expect_refused(const Outcome& o) {
    EXPECT_NE(o.out.find("Migration status: failed"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("RAM verification failed: RAM block 'pc.ram' offset 0x"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("Error: migration failed: "), std::string::npos) << o.out;
    EXPECT_EQ(o.src_status, "paused") << "the source keeps its guest (paused, as it was)";
    EXPECT_NE(o.dst_log.find("incoming migration failed: RAM verification failed"), std::string::npos) << o.dst_log;
}

}  // namespace

TEST(VerifyRam, AFlippedByteInAPagesRecordFailsTheMigrationNamingBlockAndOffset) {
    VMM_REQUIRE(need::kvm());
    expect_refused(migrate_through_flip("flip", true, false));
}

TEST(VerifyRam, AFlippedByteOnAMultifdLaneFailsTheMigrationToo) {
    VMM_REQUIRE(need::kvm());
    expect_refused(migrate_through_flip("flip-mfd", true, true));
}

TEST(VerifyRam, WithoutItTheSameFlipLandsSilently) {
    VMM_REQUIRE(need::kvm());
    Outcome o = migrate_through_flip("flip-off", false, false);
    ASSERT_NE(o.out.find("Migration status: completed"), std::string::npos) << o.out;
    ASSERT_TRUE(o.dst_hash);
    EXPECT_NE(o.src_hash, *o.dst_hash) << "the flipped byte must have landed: the proxy did not corrupt anything";
}

TEST(VerifyRam, AGuestRewritingPagesWhileTheyAreSplicedStillMigratesWithoutAFalseAlarm) {
    VMM_REQUIRE(need::kvm());
    for (const char* multifd : {"off", "on"}) {
        SCOPED_TRACE(std::string("multifd ") + multifd);
        uint16_t port = free_tcp_port();
        auto src = Vm::start("verify-stress-src", {"--guest", "stress", "-m", "256M", "--smp", "2", "--append",
                                                   "bytes=" + sized("16M", "2M")});  // converges in the nested VM too
        auto dst = destination("verify-stress-dst", tcp_uri(port));
        ASSERT_TRUE(src && dst);
        // Spliced pages are read by the kernel after their sums were taken, while the guest writes.
        for (const char* cap : {"verify-ram on", "x-zero-copy-local on"}) {
            ASSERT_EQ(src->cmd(std::string("migrate_set_capability ") + cap), "");
        }
        ASSERT_EQ(src->cmd(std::string("migrate_set_capability multifd ") + multifd), "");
        ASSERT_TRUE(eventually([&] { return src->guest_value("steps") >= 2; }, 60));
        std::string out = src->cmd("migrate " + tcp_uri(port));
        ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << dst->log();
        expect_handover(*src, *dst);
        std::string verified = dst->migrate_field("verified ram");
        EXPECT_FALSE(verified.empty()) << dst->cmd("info migrate");
        std::cout << "verified ram: " << verified << "\n";
    }
}

// A transport with its own RAM channel (the RDMA plugin's kind): the core sums the pages it hands
// the channel and checks them on the destination once the channel's round has ended.
TEST(VerifyRam, AFlippedByteInAPluginsRamChannelFailsTheMigrationToo) {
    VMM_REQUIRE(need::kvm());
    PluginDir plugins(VMM_TEST_PLUGIN_DIR);
    expect_refused(migrate_through_flip("flip-loop", true, false, "loop"));
}

// A channel that carries the sums itself, as the RDMA plugin's does (delivered as the pages land,
// checked on the destination while the round runs): the loop plugin's full table, loop-sums on.
TEST(VerifyRam, AFlippedByteInAPluginsRamChannelThatCarriesTheSumsFailsTheMigrationToo) {
    VMM_REQUIRE(need::kvm());
    PluginDir plugins(VMM_TEST_PLUGIN_DIR);
    ScopedEnv full("VMM_LOOP_FULL_TABLE", "1");
    expect_refused(migrate_through_flip("flip-loop-sums", true, false, "loop", "loop-sums"));
}

TEST(VerifyRam, AGuestRewritingPagesUnderAPluginsRamChannelMigratesWithoutAFalseAlarm) {
    VMM_REQUIRE(need::kvm());
    PluginDir plugins(VMM_TEST_PLUGIN_DIR);
    ScopedEnv full("VMM_LOOP_FULL_TABLE", "1");
    for (const char* sums : {"off", "on"}) {
        SCOPED_TRACE(std::string("loop-sums ") + sums);
        std::string uri = local_uri("loop", free_tcp_port());
        auto src = Vm::start("verify-loop-src", {"--guest", "stress", "-m", "128M", "--smp", "2", "--append",
                                                 "bytes=" + sized("32M", "2M")});  // converges in the nested VM too
        auto dst = destination("verify-loop-dst", uri, "128M", "2");
        ASSERT_TRUE(src && dst);
        ASSERT_EQ(src->cmd("migrate_set_capability verify-ram on"), "");
        ASSERT_EQ(src->cmd(std::string("migrate_set_capability loop-sums ") + sums), "");
        ASSERT_TRUE(eventually([&] { return src->guest_value("steps") >= 2; }, 60));
        std::string out = src->cmd("migrate " + uri);
        ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << dst->log();
        expect_handover(*src, *dst);
        std::string info = dst->cmd("info migrate");
        EXPECT_FALSE(text_field(info, "verified ram").empty()) << info;
        // Checked as the channel delivered them, or after each round from SUMS records.
        EXPECT_EQ(!text_field(info, "verified after its round ended").empty(), std::string(sums) == "on") << info;
    }
}

}  // namespace vmm::test

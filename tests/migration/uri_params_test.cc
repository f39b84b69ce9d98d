#include <gtest/gtest.h>

#include <algorithm>

#include "vmm/migration/session/params.h"
#include "vmm/migration/wire/uri.h"

namespace vmm::migration {

TEST(Uri, TcpRdmaUnixAndPluginSchemes) {
    auto t = parse_uri("tcp:127.0.0.1:4444");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->scheme, "tcp");
    EXPECT_EQ(t->host, "127.0.0.1");
    EXPECT_EQ(t->port, 4444);
    auto v6 = parse_uri("rdma:[fe80::1]:5555");
    ASSERT_TRUE(v6);
    EXPECT_EQ(v6->host, "fe80::1");
    EXPECT_EQ(v6->port, 5555);
    auto u = parse_uri("unix:/tmp/mig.sock");
    ASSERT_TRUE(u);
    EXPECT_EQ(u->path, "/tmp/mig.sock");
    auto p = parse_uri("loop:anything here");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->scheme, "loop");
    EXPECT_EQ(p->path, "anything here");
    EXPECT_TRUE(p->host.empty());
    auto hp = parse_uri("loop:10.0.0.1:7");  // a plugin scheme of HOST:PORT form gets both parsed
    ASSERT_TRUE(hp);
    EXPECT_EQ(hp->host, "10.0.0.1");
    EXPECT_EQ(hp->port, 7);
    EXPECT_EQ(parse_uri("defer")->scheme, "defer");
}

TEST(Uri, MistakesSayWhatIsExpected) {
    EXPECT_EQ(parse_uri("127.0.0.1:4444").error().message(),
              "'127.0.0.1:4444' is not a migration URI: use tcp:HOST:PORT, unix:PATH, rdma:HOST:PORT or file:PATH");
    EXPECT_EQ(parse_uri("localhost").error().message(),
              "'localhost' is not a migration URI: use tcp:HOST:PORT, unix:PATH, rdma:HOST:PORT or file:PATH");
    EXPECT_EQ(parse_uri("tcp:host").error().message(), "tcp: 'host' has no :PORT");
    EXPECT_EQ(parse_uri("tcp:host:0").error().message(), "tcp: 'host:0': port must be 1 to 65535");
    EXPECT_EQ(parse_uri("tcp:host:70000").error().message(), "tcp: 'host:70000': port must be 1 to 65535");
    EXPECT_EQ(parse_uri("tcp:::1:5").error().message(), "tcp: '::1:5': write IPv6 addresses in brackets, e.g. [::1]:4444");
    EXPECT_FALSE(parse_uri("tcp:[::1:5"));
    EXPECT_FALSE(parse_uri("unix:"));
}

TEST(Uri, AFileTakesAPathAndAnOffsetInWholePages) {
    auto f = parse_uri("file:/var/lib/vmm/a,b.save");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->scheme, "file");
    EXPECT_EQ(f->path, "/var/lib/vmm/a,b.save");
    EXPECT_EQ(f->offset, 0u);
    auto o = parse_uri("file:x.save,offset=1M");
    ASSERT_TRUE(o);
    EXPECT_EQ(o->path, "x.save");
    EXPECT_EQ(o->offset, 1u << 20);
    EXPECT_EQ(parse_uri("file:x,offset=100").error().message(), "file:x,offset=100: offset 100 is not a multiple of 4096");
    EXPECT_EQ(parse_uri("file:").error().message(), "file:: no file name: write file:PATH");
    EXPECT_FALSE(parse_uri("file:x,offset=lots"));
}

TEST(Settings, QemuNamesSizesAndBounds) {
    Settings s;
    ASSERT_TRUE(s.set_parameter("max-bandwidth", "40g"));
    EXPECT_EQ(s.params.max_bandwidth, 40ull << 30);
    ASSERT_TRUE(s.set_parameter("downtime-limit", "50"));
    EXPECT_EQ(s.params.downtime_limit_ms, 50u);
    ASSERT_TRUE(s.set_capability("auto-converge", true));
    EXPECT_TRUE(s.caps.auto_converge);
    EXPECT_EQ(s.set_parameter("downtime-limit", "0").error().message(),
              "migration parameter 'downtime-limit' must be an integer from 1 to 2000000, got '0'");
    EXPECT_EQ(s.set_parameter("cpu-throttle-initial", "100").error().message(),
              "migration parameter 'cpu-throttle-initial' must be an integer from 1 to 99, got '100'");
    EXPECT_FALSE(s.set_parameter("max-bandwidth", "fast"));
    EXPECT_EQ(s.set_capability("warp-drive", true).error().message(),
              "unknown migration capability 'warp-drive'; 'info migrate_capabilities' lists them");
}

// A transport's rows (what the RDMA plugin declares through its ABI) are checked, listed and
// explained as the core's are; the transport is handed only what a user set, in canonical text.
TEST(Settings, TransportRowsAreCheckedListedAndHandedOverOnceDeclared) {
    Settings s;
    EXPECT_FALSE(s.set_capability("rdma-pin-all", true));
    using K = TransportSetting::Kind;
    s.declare_transport_setting({"rdma-pin-all", "pin it all", K::capability});
    s.declare_transport_setting({"x-rdma-chunk-size", "the chunk", K::size, 1 << 20, 1 << 30, true, 1 << 20});
    s.declare_transport_setting({"rdma-channels", "queue pairs", K::integer, 1, 16, false, 1});
    auto listed = [&](const std::string& name) {
        for (const auto& [n, v] : s.parameter_list())
            if (n == name) return v;
        return std::string("(not listed)");
    };
    EXPECT_EQ(listed("x-rdma-chunk-size"), "1048576") << "the fallback, until set";
    EXPECT_TRUE(s.params.transport.empty()) << "nothing set: nothing handed over";
    ASSERT_TRUE(s.set_capability("rdma-pin-all", true));
    ASSERT_TRUE(s.set_parameter("x-rdma-chunk-size", "2M"));
    EXPECT_TRUE(s.caps.transport.at("rdma-pin-all"));
    EXPECT_EQ(s.params.transport.at("x-rdma-chunk-size"), "2097152");
    EXPECT_EQ(listed("x-rdma-chunk-size"), "2097152");
    EXPECT_EQ(s.set_parameter("x-rdma-chunk-size", "3M").error().message(),
              "migration parameter 'x-rdma-chunk-size' must be a power of two from 1 MiB to 1 GiB, got '3M'");
    EXPECT_EQ(s.set_parameter("x-rdma-chunk-size", "512k").error().message(),
              "migration parameter 'x-rdma-chunk-size' must be a power of two from 1 MiB to 1 GiB, got '512k'");
    EXPECT_FALSE(s.set_parameter("x-rdma-chunk-size", "2g"));
    EXPECT_EQ(s.set_parameter("rdma-channels", "17").error().message(),
              "migration parameter 'rdma-channels' must be an integer from 1 to 16, got '17'");
    EXPECT_EQ(s.params.transport.at("x-rdma-chunk-size"), "2097152") << "a refused value changes nothing";
    EXPECT_FALSE(s.set_capability("x-rdma-chunk-size", true)) << "a parameter is not a capability";
    EXPECT_EQ(s.set_parameter("rdma-chunk-size", "2M").error().message(),
              "unknown migration parameter 'rdma-chunk-size' (did you mean 'x-rdma-chunk-size'?); 'info "
              "migrate_parameters' lists them");
    bool described = false;
    for (const auto& d : s.describe()) {
        if (d.name != "x-rdma-chunk-size") continue;
        described = true;
        EXPECT_EQ(d.kind, "size");
        EXPECT_EQ(d.value, "2097152");
        EXPECT_EQ(d.range, "a power of two from 1 MiB to 1 GiB");
        EXPECT_EQ(d.help, "the chunk");
    }
    EXPECT_TRUE(described);
}

// Every core row is described too, with its range where it has one.
TEST(Settings, DescribeExplainsEveryRow) {
    Settings s;
    auto d = s.describe();
    ASSERT_EQ(d.size(), setting_rows().size());
    for (const auto& row : d) EXPECT_FALSE(row.help.empty()) << row.name;
    auto it = std::find_if(d.begin(), d.end(), [](const auto& r) { return r.name == "downtime-limit"; });
    ASSERT_NE(it, d.end());
    EXPECT_EQ(it->range, "from 1 to 2000000");
    EXPECT_EQ(it->value, "300");
    it = std::find_if(d.begin(), d.end(), [](const auto& r) { return r.name == "max-bandwidth"; });
    ASSERT_NE(it, d.end());
    EXPECT_TRUE(it->live);
}

}  // namespace vmm::migration

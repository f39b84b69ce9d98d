#include "vmm/config/config.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace vmm::config {

TEST(Config, ParsesEverySection) {
    auto c = parse_config(R"(
[machine]
name = "demo"
vcpus = 2
dirty_tracking = "ring"
start_paused = true

[[ram]]
name = "pc.ram"
size = "256M"

[[ram]]
name = "high"
address = "4G"
size = 1073741824
huge_pages = "transparent"
prealloc = true

[guest]
payload = "stress"
params = { bytes = "64M", stride = 4096 }

[serial]
output = "file:/tmp/serial.log"

[monitor]
hmp = "stdio"
qmp = "unix:/tmp/q.sock"

[migration]
downtime_limit_ms = 50
max_bandwidth = "40g"
capabilities = { auto-converge = true }
parameters = { x-rdma-chunk-size = "1M", rdma-channels = 2 }
x-resume-window = 0
verify-ram = true
)", "demo.toml");
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_EQ(c->name, "demo");
    EXPECT_EQ(c->vcpus, 2u);
    EXPECT_EQ(c->dirty_tracking, memory::DirtyBackend::ring);
    EXPECT_TRUE(c->start_paused);
    ASSERT_EQ(c->ram.size(), 2u);
    EXPECT_EQ(c->ram[1].guest_addr, 4ull << 30);
    EXPECT_EQ(c->ram[1].huge_pages, memory::HugePages::transparent);
    EXPECT_FALSE(c->ram[0].prealloc);
    EXPECT_TRUE(c->ram[1].prealloc);
    EXPECT_EQ(c->payload, "stress");
    EXPECT_EQ(c->payload_params, "bytes=64M stride=4096");
    EXPECT_EQ(c->serial.kind, SerialOutput::Kind::file);
    EXPECT_EQ(c->hmp.kind, Endpoint::Kind::stdio);
    EXPECT_EQ(c->qmp.path, "/tmp/q.sock");
    // Every entry by its row's name, as the monitor takes it, with the place it was written.
    std::vector<std::tuple<std::string, std::string, bool>> got;
    for (const auto& m : c->migration.settings) got.emplace_back(m.name, m.value, m.capability);
    EXPECT_EQ(got, (std::vector<std::tuple<std::string, std::string, bool>>{
                       {"auto-converge", "on", true},
                       {"downtime-limit", "50", false},
                       {"max-bandwidth", "40g", false},
                       {"rdma-channels", "2", false},
                       {"x-rdma-chunk-size", "1M", false},
                       {"verify-ram", "on", true},
                       {"x-resume-window", "0", false}}));
    EXPECT_EQ(c->migration.settings[1].where, "demo.toml:31:21") << "downtime_limit_ms's line";
}

TEST(Config, DefaultsGiveOneRamBlockAndTheIdlePayload) {
    auto c = parse_config("", "empty.toml");
    ASSERT_TRUE(c);
    auto ram = effective_ram(*c);
    ASSERT_EQ(ram.size(), 1u);
    EXPECT_EQ(ram[0].name, "pc.ram");
    EXPECT_EQ(ram[0].size, kDefaultRam);
    EXPECT_EQ(c->payload, "idle");
}

struct BadCase {
    const char* toml;
    const char* message;
};

TEST(Config, ErrorsNameFileLineColumnAndWhatWasExpected) {
    const BadCase cases[] = {
        {"[machine]\nvcpus = \"two\"\n", "bad.toml:2:9: machine.vcpus: expected an integer, found a string"},
        {"[machine]\nvcpus = 0\n", "bad.toml:2:9: machine.vcpus: expected 1 to 256, found 0"},
        {"[machine]\nvcpu = 2\n", "bad.toml:2:1: unknown key 'machine.vcpu'; expected one of: name, vcpus, dirty_tracking, start_paused"},
        {"[[ram]]\nname = \"r\"\nsize = \"12x\"\n", "bad.toml:3:8: ram.size: '12x' is not a size: use a number with an optional k, m, g or t suffix (e.g. 256M)"},
        {"[[ram]]\nname = \"r\"\n", "bad.toml:1:1: [ram]: missing key 'size'"},
        {"[monitor]\nhmp = \"tcp:1\"\n", "bad.toml:2:7: monitor.hmp: 'tcp:1' is not a monitor endpoint: use stdio, unix:PATH[,mode=0660] or none"},
        {"[monitor]\nqmp = \"stdio\"\n", "bad.toml:2:7: monitor.qmp: 'stdio' is not a monitor endpoint: use unix:PATH[,mode=0660] or none"},
        {"[guest]\nparams = \"bytes\"\n", "bad.toml:2:10: guest.params: payload parameter 'bytes' is not key=value"},
        {"machine = 3\n", "bad.toml:1:11: machine: expected a table [machine], found an integer"},
        {"[machine\n", "bad.toml:1:9:"},
    };
    for (const auto& bc : cases) {
        auto c = parse_config(bc.toml, "bad.toml");
        ASSERT_FALSE(c) << bc.toml;
        EXPECT_EQ(c.error().message().rfind(bc.message, 0), 0u) << "got: " << c.error().message();
        EXPECT_EQ(c.error().message().find('\n'), std::string::npos);
    }
}

TEST(Config, MissingFileSaysWhichFile) {
    auto c = load_config_file("/nonexistent/vmm.toml");
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().message(), "cannot read config file /nonexistent/vmm.toml: No such file or directory");
}

TEST(Config, PayloadParameterValidation) {
    EXPECT_TRUE(validate_payload_params("bytes=64M  stride=4096 "));
    EXPECT_TRUE(validate_payload_params(""));
    EXPECT_FALSE(validate_payload_params("=3"));
    EXPECT_FALSE(validate_payload_params("Bytes=3"));
    EXPECT_FALSE(validate_payload_params("bytes="));
}

}  // namespace vmm::config

namespace vmm::config {

TEST(Config, EveryShippedConfigParses) {
    namespace fs = std::filesystem;
    int n = 0;
    for (const auto& e : fs::directory_iterator(fs::path(VMM_SOURCE_DIR) / "configs")) {
        if (e.path().extension() != ".toml") continue;
        auto c = load_config_file(e.path().string());
        EXPECT_TRUE(c) << c.error().message();
        ++n;
    }
    EXPECT_GE(n, 3);
}

}  // namespace vmm::config

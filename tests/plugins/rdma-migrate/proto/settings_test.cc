// The rdma: transport's settings table: the rows vmm is given, and reading values back by them.
#include "proto/settings.h"
#include "vmm/migration/transport/plugin_settings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rdma_migrate {
namespace {

std::vector<std::string> names() {
    std::vector<std::string> out;
    for (const vmm_setting* r = setting_rows(); r->name != nullptr; ++r) out.emplace_back(r->name);
    return out;
}

TEST(RdmaSettings, TheRowsAreTheTransportsOnlyListOfNames) {
    EXPECT_EQ(names(), (std::vector<std::string>{"rdma-pin-all", "x-rdma-chunk-size", "rdma-pin-limit", "rdma-channels",
                                                "x-rdma-postcopy-read", "x-rdma-postcopy-read-push",
                                                "x-rdma-postcopy-read-wait"}));
    const vmm_setting& chunk = setting_rows()[1];
    EXPECT_EQ(chunk.kind, VMM_SETTING_SIZE);
    EXPECT_EQ(chunk.flags, VMM_SETTING_F_POWER_OF_TWO);
    EXPECT_EQ(chunk.min, 1u << 20);  // QEMU 11.1's range
    EXPECT_EQ(chunk.max, 1u << 30);
    EXPECT_EQ(chunk.fallback, 1u << 20);
}

TEST(RdmaSettings, NothingSetGivesTheFallbacksAndAChunkSizeNotTold) {
    auto s = read_settings(nullptr, 0, nullptr, 0);
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_FALSE(s->pin_all);
    EXPECT_EQ(s->chunk_size, 1u << 20);
    EXPECT_FALSE(s->chunk_size_set);
    EXPECT_EQ(s->pin_limit, 0u);
    EXPECT_EQ(s->channels, 1u);
    EXPECT_EQ(s->postcopy_read_wait_us, 1000u);
}

// vmm's own check of a plugin's rows, as it loads the plugin (a row it refuses keeps the whole
// transport out: every rdma: migration would fail), passes every row.
TEST(RdmaSettings, VmmTakesEveryRowWhenItLoadsThePlugin) {
    vmm_transport_ops ops{};
    ops.abi_version = VMM_TRANSPORT_ABI_VERSION;
    ops.struct_size = sizeof ops;
    ops.scheme = "rdma";
    ops.settings = setting_rows();
    auto rows = vmm::migration::plugin_settings(ops, "vmm-transport-rdma.so");
    ASSERT_TRUE(rows) << rows.error().message();
    EXPECT_EQ(rows->size(), names().size());
}

TEST(RdmaSettings, ValuesAsVmmPassesThemAndAsAnOlderVmmDid) {
    vmm_kv caps[] = {{"rdma-pin-all", "on"}, {"x-rdma-postcopy-read", "on"}};
    vmm_kv params[] = {{"x-rdma-chunk-size", "2097152"}, {"rdma-pin-limit", "64M"}, {"rdma-channels", "4"},
                       {"x-rdma-postcopy-read-wait", "0"}};
    auto s = read_settings(caps, 2, params, 4);
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_TRUE(s->pin_all);
    EXPECT_TRUE(s->postcopy_read);
    EXPECT_EQ(s->chunk_size, 2u << 20);
    EXPECT_TRUE(s->chunk_size_set);
    EXPECT_EQ(s->pin_limit, 64u << 20);
    EXPECT_EQ(s->channels, 4u);
    EXPECT_EQ(s->postcopy_read_wait_us, 0u);
}

TEST(RdmaSettings, AValueOutsideItsRowOrANameNoRowHasIsRefused) {
    vmm_kv small[] = {{"x-rdma-chunk-size", "65536"}};
    EXPECT_EQ(read_settings(nullptr, 0, small, 1).error().message(),
              "migration parameter 'x-rdma-chunk-size' must be a power of two from 1048576 to 1073741824, got '65536'");
    vmm_kv odd[] = {{"x-rdma-chunk-size", "3M"}};
    EXPECT_FALSE(read_settings(nullptr, 0, odd, 1));
    vmm_kv many[] = {{"rdma-channels", "17"}};
    EXPECT_FALSE(read_settings(nullptr, 0, many, 1));
    vmm_kv long_wait[] = {{"x-rdma-postcopy-read-wait", "100001"}};
    EXPECT_FALSE(read_settings(nullptr, 0, long_wait, 1));
    vmm_kv old_name[] = {{"rdma-chunk-size", "1M"}};
    EXPECT_EQ(read_settings(nullptr, 0, old_name, 1).error().message(), "rdma transport: no parameter named 'rdma-chunk-size'");
    vmm_kv cap_as_param[] = {{"rdma-pin-all", "on"}};
    EXPECT_FALSE(read_settings(nullptr, 0, cap_as_param, 1));
    vmm_kv maybe[] = {{"rdma-pin-all", "maybe"}};
    EXPECT_EQ(read_settings(maybe, 1, nullptr, 0).error().message(), "capability 'rdma-pin-all': 'maybe' is neither on nor off");
}

}  // namespace
}  // namespace rdma_migrate

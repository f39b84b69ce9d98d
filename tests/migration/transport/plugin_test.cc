// Transports loaded from plugins: the loop: test plugin carries a whole migration through the
// C ABI and its own RAM channel; a missing plugin is one line naming the paths searched.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/support/require.h"
#include "tests/support/kvm_fixture.h"
#include "tests/support/vm_pair.h"

namespace vmm::test {

TEST(Plugin, MigrationThroughAPluginTransportAndItsRamChannel) {
    VMM_REQUIRE(need::kvm());
    PluginDir plugins(VMM_TEST_PLUGIN_DIR);
    std::string uri = local_uri("loop", free_tcp_port());
    // 32 MiB under a host's KVM; 2 MiB in the nested VM, where a larger working set never converges.
    auto src = Vm::start("plugin-src", {"--guest", "stress", "-m", "128M", "--smp", "2", "--append",
                                        "bytes=" + sized("32M", "2M")});
    auto dst = Vm::start("plugin-dst", {"-m", "128M", "--smp", "2", "-S", "--incoming", uri});
    ASSERT_TRUE(src && dst);
    // The plugin's own parameter and capability: declared by loading it on first use.
    ASSERT_EQ(src->cmd("migrate_set_parameter loop-chunk-size 65536"), "");
    ASSERT_EQ(src->cmd("migrate_set_capability loop-verify on"), "");
    EXPECT_NE(src->cmd("info migrate_parameters").find("loop-chunk-size: 65536"), std::string::npos);
    std::string out = src->cmd("migrate " + uri);
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log();
    EXPECT_EQ(src->ramhash(), dst->ramhash());
    uint64_t steps = dst->guest_value("steps");
    EXPECT_EQ(dst->cmd("cont"), "");
    EXPECT_TRUE(eventually([&] { return dst->guest_value("steps") > steps + 1; }, 60));
}

// A plugin that declares its settings as rows (vmm_setting): vmm lists them with their fallback
// until set, explains them (info migrate_settings), refuses a value outside a row in one line of
// its own, and hands the plugin what was set; a malformed row refuses the plugin at load.
TEST(Plugin, ItsSettingsAreRowsOfTheOneTable) {
    VMM_REQUIRE(need::kvm());
    PluginDir plugins(VMM_TEST_PLUGIN_DIR);
    ScopedEnv rows("VMM_LOOP_FULL_TABLE", "rows");
    std::string uri = local_uri("loop", free_tcp_port());
    auto src = Vm::start("rows-src", {"--guest", "idle", "-m", "64M", "--prefill", "8M"});
    auto dst = Vm::start("rows-dst", {"-m", "64M", "-S", "--incoming", uri});
    ASSERT_TRUE(src && dst);
    EXPECT_EQ(src->cmd("migrate_set_parameter loop-chunk-size 3000"),
              "Error: migration parameter 'loop-chunk-size' must be a power of two from 4 KiB to 1 MiB, got '3000'\n");
    EXPECT_NE(src->cmd("info migrate_parameters").find("loop-chunk-size: 65536\n"), std::string::npos)
        << "the row's fallback, until set";
    std::string help = src->cmd("info migrate_settings");
    EXPECT_NE(help.find("loop-chunk-size = 65536   (size, a power of two from 4 KiB to 1 MiB)\n    loop: bytes per RAM "
                        "channel write\n"),
              std::string::npos)
        << help;
    EXPECT_NE(help.find("downtime-limit = 300   (integer, from 1 to 2000000)\n    longest acceptable pause, ms\n"),
              std::string::npos)
        << help;
    ASSERT_EQ(src->cmd("migrate_set_parameter loop-chunk-size 128k"), "");
    EXPECT_NE(src->cmd("info migrate_parameters").find("loop-chunk-size: 131072\n"), std::string::npos);
    std::string out = src->cmd("migrate " + uri);
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log();
    EXPECT_EQ(src->ramhash(), dst->ramhash());

    ScopedEnv bad("VMM_LOOP_FULL_TABLE", "bad-rows");
    auto other = Vm::start("badrows-src", {"--guest", "idle", "-m", "64M"});
    ASSERT_TRUE(other);
    std::string refused = other->cmd("migrate_set_parameter loop-chunk-size 65536");
    EXPECT_NE(refused.find("setting 'loop-chunk-size': its fallback 1 is outside 4096..1048576"), std::string::npos)
        << refused;
    EXPECT_EQ(std::count(refused.begin(), refused.end(), '\n'), 1) << refused;
}

TEST(Plugin, ProgressMovesDuringARoundThroughTheRamChannel) {
    VMM_REQUIRE(need::kvm());
    PluginDir plugins(VMM_TEST_PLUGIN_DIR);
    std::string uri = local_uri("loop", free_tcp_port());
    // 32 MiB host-filled at 16 MB/s: the bulk round takes 2 s; the monitor must see it move.
    auto src = Vm::start("progress-src", {"--guest", "idle", "-m", "64M", "--prefill", "32M"});
    auto dst = Vm::start("progress-dst", {"-m", "64M", "-S", "--incoming", uri});
    ASSERT_TRUE(src && dst);
    ASSERT_EQ(src->cmd("migrate_set_parameter max-bandwidth 16m"), "");
    ASSERT_EQ(src->cmd("migrate -d " + uri), "");
    ASSERT_TRUE(eventually([&] { return std::stoull("0" + src->migrate_field("transferred ram")) > 4096; }, 30))
        << src->cmd("info migrate");
    EXPECT_EQ(src->migrate_status(), "active") << "progress must show before the bulk round ends";
    EXPECT_EQ(src->cmd("migrate_set_parameter max-bandwidth 0"), "");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "completed"; }, 60)) << src->cmd("info migrate");
    EXPECT_EQ(src->ramhash(), dst->ramhash());
}

TEST(Plugin, MissingPluginIsOneLineNamingTheSchemeAndPaths) {
    VMM_REQUIRE(need::kvm());
    PluginDir plugins("/nonexistent/plugins");
    auto src = Vm::start("noplugin-src", {"--guest", "idle", "-m", "64M"});
    ASSERT_TRUE(src);
    std::string out = src->cmd("migrate warp:somewhere:1");
    EXPECT_EQ(out.rfind("Error: no transport for 'warp:': vmm-transport-warp.so is not in /nonexistent/plugins, ", 0), 0u) << out;
    EXPECT_NE(out.find("(build it, or set VMM_PLUGIN_DIR)\n"), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
    EXPECT_EQ(src->status(), "running");
    EXPECT_EQ(src->cmd("migrate_set_capability warp-speed on").rfind("Error: unknown migration capability 'warp-speed'", 0), 0u);
}

}  // namespace vmm::test

#include "vmmd/runtime/launch.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace vmmd {
namespace {

bool has_pair(const std::vector<std::string>& a, const std::string& k, const std::string& v) {
    for (size_t i = 0; i + 1 < a.size(); ++i)
        if (a[i] == k && a[i + 1] == v) return true;
    return false;
}
bool has(const std::vector<std::string>& a, const std::string& k) { return std::find(a.begin(), a.end(), k) != a.end(); }

DomainDef sample() {
    DomainDef d;
    d.name = "db";
    d.memory_kib = 65536;
    d.vcpus = 2;
    d.kernel = "stress";
    d.cmdline = "bytes=8M";
    d.dirty_tracking = "ring";
    return d;
}

TEST(Launch, ABootRunsThePayloadWithTheDefinitionsSettings) {
    auto a = vmm_arguments(sample(), {"/opt/vmm/bin/vmm", "/run/x.qmp", false, ""});
    EXPECT_EQ(a[0], "/opt/vmm/bin/vmm");
    EXPECT_TRUE(has_pair(a, "--name", "db"));
    EXPECT_TRUE(has_pair(a, "-m", "65536K"));
    EXPECT_TRUE(has_pair(a, "--smp", "2"));
    EXPECT_TRUE(has_pair(a, "--guest", "stress"));
    EXPECT_TRUE(has_pair(a, "--append", "bytes=8M"));
    EXPECT_TRUE(has_pair(a, "--dirty-tracking", "ring"));
    EXPECT_TRUE(has_pair(a, "--serial", "none"));
    EXPECT_TRUE(has_pair(a, "--monitor", "none"));
    EXPECT_TRUE(has_pair(a, "--qmp", "unix:/run/x.qmp"));
    EXPECT_FALSE(has(a, "-S"));
    EXPECT_FALSE(has(a, "--incoming"));
    EXPECT_FALSE(has(a, "--mem-prealloc"));
}

TEST(Launch, PausedPreallocatedWithASerialFile) {
    DomainDef d = sample();
    d.prealloc = true;
    d.serial_file = "/var/log/db.serial";
    d.cmdline.clear();
    auto a = vmm_arguments(d, {"vmm", "q", true, ""});
    EXPECT_TRUE(has(a, "-S"));
    EXPECT_TRUE(has(a, "--mem-prealloc"));
    EXPECT_TRUE(has_pair(a, "--serial", "file:/var/log/db.serial"));
    EXPECT_FALSE(has(a, "--append")) << "no empty parameters";
}

TEST(Launch, AnIncomingMigrationWaitsInsteadOfBooting) {
    auto a = vmm_arguments(sample(), {"vmm", "q", true, "tcp:0.0.0.0:49152"});
    EXPECT_TRUE(has_pair(a, "--incoming", "tcp:0.0.0.0:49152"));
    EXPECT_FALSE(has(a, "--guest"));
    EXPECT_FALSE(has(a, "--append"));
}

TEST(Launch, TheHardLimitIsTheMemlockLimitInBytes) {
    DomainDef d = sample();
    EXPECT_FALSE(memlock_limit(d));
    d.hard_limit_kib = 1048576;
    EXPECT_EQ(memlock_limit(d), 1073741824u);
}

}  // namespace
}  // namespace vmmd

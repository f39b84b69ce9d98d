// Lazy restores (x-restore-lazy, the default), through the real vmm binary: the guest runs (or waits, with -S)
// before its RAM is in, each page brought in from the file as it is first touched (by a vCPU, or
// by the VMM's own threads) or by the fill in file order; the RAM ends equal to the saver's, the
// pattern guest's own check passes while pages arrive, info migrate shows the faults as a
// postcopy's, and a damaged page ends the guest naming it.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "tests/support/kvm_fixture.h"
#include "tests/support/require.h"
#include "tests/support/vm_pair.h"
#include "vmm/migration/wire/file_format.h"

namespace vmm::test {

namespace {

using namespace std::chrono_literals;

// A destination that waits (--incoming defer) restores `path` lazily; `paused`: with -S.
std::unique_ptr<Vm> lazy_restore(const std::string& name, const std::string& path, const std::string& mem,
                                 const std::string& smp, bool paused) {
    std::vector<std::string> args{"-m", mem, "--smp", smp, "--incoming", "defer"};
    if (paused) args.push_back("-S");
    auto dst = Vm::start(name, args);
    if (!dst) return nullptr;
    EXPECT_EQ(dst->cmd("migrate_set_capability x-restore-lazy on"), "");
    EXPECT_EQ(dst->cmd("migrate_incoming file:" + path), "");
    return dst;
}

// "postcopy missing pages: N (M placed)" of a destination's info migrate.
std::pair<uint64_t, uint64_t> missing_and_placed(const std::string& info) {
    std::string v = text_field(info, "postcopy missing pages");
    uint64_t missing = 0, placed = 0;
    if (std::sscanf(v.c_str(), "%lu (%lu placed)", &missing, &placed) != 2) return {0, 0};
    return {missing, placed};
}

}  // namespace

// A stress guest saved paused, restored lazily under -S: the monitor's RAM digest (the VMM's own
// thread touching every page) is the saver's, every page of 128 MiB is placed, and the guest runs.
TEST(FileLazyRestore, APausedRestoreHasTheSaversRamAndEveryPagePlaced) {
    VMM_REQUIRE(need::kvm());
    std::string path = temp_path("lazy-stress.save");
    auto src = Vm::start("lazy-stress-src", {"--guest", "stress", "-m", "128M", "--smp", "2", "--append", "bytes=16M"});
    ASSERT_TRUE(src);
    ASSERT_TRUE(eventually([&] { return src->guest_value("steps") >= 2; }, 60));
    ASSERT_EQ(src->cmd("stop"), "");
    std::string out = src->cmd("migrate file:" + path);
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log();
    auto dst = lazy_restore("lazy-stress-dst", path, "128M", "2", true);
    ASSERT_TRUE(dst);
    ASSERT_TRUE(eventually([&] { return dst->status() == "paused"; }, 30)) << dst->log();
    EXPECT_EQ(dst->ramhash(), src->ramhash());
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 60)) << dst->cmd("info migrate");
    std::string info = dst->cmd("info migrate");
    auto [missing, placed] = missing_and_placed(info);
    EXPECT_EQ(missing, (128u << 20) / 4096) << info;
    EXPECT_EQ(placed, missing) << info;
    EXPECT_NE(info.find("postcopy fault latency"), std::string::npos) << info;
    EXPECT_NE(info.find("lazy restore ready: "), std::string::npos) << info;
    EXPECT_NE(dst->log().find("every page is in (lazy restore)"), std::string::npos) << dst->log();
    uint64_t steps = dst->guest_value("steps");
    ASSERT_EQ(dst->cmd("cont"), "");
    EXPECT_TRUE(eventually([&] { return dst->guest_value("steps") > steps + 1; }, 60)) << "the restored guest did not run";
    EXPECT_EQ(dst->guest_value("errors"), 0u);
    std::filesystem::remove(path);
}

// A pattern guest saved while it runs, restored lazily with no -S: it runs at once, and its own
// check of every page passes twice while (and after) its pages come in.
TEST(FileLazyRestore, APatternGuestRunsAtOnceWithItsOwnCheckClean) {
    VMM_REQUIRE(need::kvm());
    std::string path = temp_path("lazy-pattern.save");
    auto src = Vm::start("lazy-pattern-src", {"--guest", "pattern", "-m", "128M", "--smp", "1", "--append",
                                              sized("bytes=32M check=512", "bytes=4M check=64"), "--prefill", "64M"});
    ASSERT_TRUE(src);
    ASSERT_TRUE(eventually([&] { return src->guest_value("results") >= 1; }, 60)) << src->cmd("info guest");
    std::string out = src->cmd("migrate file:" + path);
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log();
    src.reset();
    auto dst = lazy_restore("lazy-pattern-dst", path, "128M", "1", false);
    ASSERT_TRUE(dst);
    ASSERT_TRUE(eventually([&] { return dst->status() == "running"; }, 30)) << dst->status() << dst->log();
    uint64_t results = dst->guest_value("results");
    EXPECT_TRUE(eventually([&] { return dst->guest_value("results") >= results + 2; }, 60))
        << "the pattern check did not pass again on the lazily restored guest:\n" << dst->cmd("info guest");
    EXPECT_EQ(dst->guest_value("errors"), 0u) << dst->cmd("info guest");
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 60)) << dst->cmd("info migrate");
    std::string info = dst->cmd("info migrate");
    std::cout << "lazy restore of a running pattern guest: " << text_field(info, "postcopy requests") << " faults, "
              << text_field(info, "postcopy fault latency") << "; " << text_field(info, "postcopy blocktime") << "\n";
    auto [missing, placed] = missing_and_placed(info);
    EXPECT_EQ(placed, missing) << info;
    std::filesystem::remove(path);
}

// A damaged page: the lazy restore reads it (the fill, or a fault) and ends the guest, naming the
// page, in one line. With x-restore-lazy off the same save's RAM is read before the guest may run.
TEST(FileLazyRestore, ADamagedPageEndsTheGuestNamingItAndTurnedOffTheFileIsReadFirst) {
    VMM_REQUIRE(need::kvm());
    std::string path = temp_path("lazy-bad.save");
    auto src = Vm::start("lazy-bad-src", {"--guest", "idle", "-m", "64M", "--smp", "1", "--prefill", "8M"});
    ASSERT_TRUE(src);
    ASSERT_EQ(src->cmd("stop"), "");
    std::string out = src->cmd("migrate file:" + path);
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out;
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(migration::kFileHeaderSize + 5 * 4096 + 9));
    f.put('\x5a');
    f.close();
    auto dst = lazy_restore("lazy-bad-dst", path, "64M", "1", true);
    ASSERT_TRUE(dst);
    auto ended = dst->process().wait(30s);
    ASSERT_TRUE(ended) << "the damaged page did not end the restore: " << dst->log();
    EXPECT_NE(*ended, 0);
    EXPECT_NE(dst->log().find("file:" + path + ": block 'pc.ram', page at offset 0x5000: its contents do not match"),
              std::string::npos)
        << dst->log();
    dst->forget_monitor();

    // With x-restore-lazy off, the file is read before the guest may run: no lazy figures.
    std::string good = temp_path("lazy-off.save");
    ASSERT_NE(src->cmd("migrate file:" + good).find("Migration status: completed"), std::string::npos);
    auto off = Vm::start("lazy-off", {"-m", "64M", "--smp", "1", "-S", "--incoming", "defer"});
    ASSERT_TRUE(off);
    EXPECT_EQ(off->cmd("migrate_set_capability x-restore-lazy off"), "");
    EXPECT_EQ(off->cmd("migrate_incoming file:" + good), "");
    ASSERT_TRUE(eventually([&] { return off->migrate_status() == "completed"; }, 30)) << off->log();
    EXPECT_EQ(off->ramhash(), src->ramhash());
    EXPECT_EQ(off->cmd("info migrate").find("lazy restore ready"), std::string::npos) << off->cmd("info migrate");
    std::filesystem::remove(good);
    std::filesystem::remove(path);
}

// A vmm that cannot have a userfaultfd (root without CAP_SYS_PTRACE, with
// vm.unprivileged_userfaultfd=0: as a service confined so would be) restores by reading the file
// first, saying so in one line, with the same RAM.
TEST(FileLazyRestore, WithoutAUserfaultfdTheFileIsReadFirst) {
    VMM_REQUIRE(need::kvm());
    if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run the restoring vmm without CAP_SYS_PTRACE";
    if (read_text_file("/proc/sys/vm/unprivileged_userfaultfd").substr(0, 1) != "0") {
        GTEST_SKIP() << "needs vm.unprivileged_userfaultfd=0, so that a vmm without CAP_SYS_PTRACE has no userfaultfd";
    }
    if (::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "needs setpriv (util-linux)";
    std::string path = temp_path("lazy-nouffd.save");
    auto src = Vm::start("lazy-nouffd-src", {"--guest", "idle", "-m", "64M", "--smp", "1", "--prefill", "8M"});
    ASSERT_TRUE(src);
    ASSERT_EQ(src->cmd("stop"), "");
    ASSERT_NE(src->cmd("migrate file:" + path).find("Migration status: completed"), std::string::npos);
    auto dst = Vm::start("lazy-nouffd-dst", {"-m", "64M", "--smp", "1", "-S", "--incoming", "file:" + path},
                         {"setpriv", "--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace", "--"});
    ASSERT_TRUE(dst);
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 30)) << dst->log();
    EXPECT_EQ(dst->ramhash(), src->ramhash());
    EXPECT_NE(dst->log().find("read before the guest runs, not lazily: userfaultfd"), std::string::npos) << dst->log();
    EXPECT_EQ(dst->cmd("info migrate").find("lazy restore ready"), std::string::npos);
    std::filesystem::remove(path);
}

}  // namespace vmm::test

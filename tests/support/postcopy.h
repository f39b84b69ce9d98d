// What the postcopy migration tests share: the skip when userfaultfd is missing, a destination
// with postcopy-ram on, and numbers read off 'info migrate'.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/support/kvm_fixture.h"
#include "tests/support/vm_pair.h"
#include "vmm/migration/postcopy/userfault.h"

namespace vmm::test {


// A destination with postcopy-ram on (as QEMU, both sides), and `more` capability settings
// ("NAME on|off"): deferred, then told where to listen.
inline std::unique_ptr<Vm> postcopy_destination(const std::string& name, const std::string& uri, const std::string& mem,
                                                const std::string& smp, bool paused,
                                                const std::vector<std::string>& more = {}) {
    std::vector<std::string> args = {"-m", mem, "--smp", smp, "--incoming", "defer"};
    if (paused) args.push_back("-S");
    auto vm = Vm::start(name, args);
    if (!vm) return vm;
    EXPECT_EQ(vm->cmd("migrate_set_capability postcopy-ram on"), "");
    for (const auto& c : more) EXPECT_EQ(vm->cmd("migrate_set_capability " + c), "");
    EXPECT_EQ(vm->cmd("migrate_incoming " + uri), "");
    return vm;
}

// A 128 MiB stress guest (1 vCPU, `bytes` rewritten) running its second step, as a source.
inline std::unique_ptr<Vm> stress_source(const std::string& name, const std::string& bytes = "16M") {
    auto vm = Vm::start(name, {"--guest", "stress", "-m", "128M", "--smp", "1", "--append", "bytes=" + bytes});
    if (vm) {
        EXPECT_TRUE(eventually([&] { return vm->guest_value("steps") >= 2; }, 60));
    }
    return vm;
}

// Starts a postcopy migration to `uri` that switches after the bulk round (precopy at
// `bandwidth`, the push after the switch at `postcopy_bandwidth`: slow enough to act on).
inline void migrate_switching_after_bulk(Vm& src, const std::string& uri, const std::string& bandwidth = "16m",
                                         const std::string& postcopy_bandwidth = "1m") {
    EXPECT_EQ(src.cmd("migrate_set_capability postcopy-ram on"), "");
    EXPECT_EQ(src.cmd("migrate_set_parameter x-postcopy-after-rounds 1"), "");
    EXPECT_EQ(src.cmd("migrate_set_parameter max-bandwidth " + bandwidth), "");
    EXPECT_EQ(src.cmd("migrate_set_parameter max-postcopy-bandwidth " + postcopy_bandwidth), "");
    EXPECT_EQ(src.cmd("migrate -d " + uri), "");
}

// For a test that acts while postcopy runs, with the guest running at the destination: no
// readahead, or a guest working through its memory in order pulls the rest in at once.
inline void keep_the_push_slow(Vm& src) {
    EXPECT_EQ(src.cmd("migrate_set_parameter x-postcopy-readahead 0"), "");
}

// migrate_pause on the source in postcopy; once both sides are in postcopy-paused,
// migrate_recover on the destination at `again` (any transport's URI) and migrate -r to it.
inline void pause_and_recover(Vm& src, Vm& dst, const std::string& again) {
    EXPECT_EQ(src.cmd("migrate_pause"), "");
    ASSERT_TRUE(eventually([&] { return src.migrate_status() == "postcopy-paused"; }, 60)) << src.cmd("info migrate") << src.log();
    ASSERT_TRUE(eventually([&] { return dst.migrate_status() == "postcopy-paused"; }, 60)) << dst.cmd("info migrate") << dst.log();
    EXPECT_EQ(dst.cmd("migrate_recover " + again), "");
    EXPECT_EQ(src.cmd("migrate -d -r " + again), "");
}

// Both sides paused: migrate_recover on a new port, migrate -r to it, and both complete.
inline void recover_and_complete(Vm& src, Vm& dst) {
    // migrate_pause answers before the source has let the link go: 'migrate -r' wants it paused.
    ASSERT_TRUE(eventually([&] { return src.migrate_status() == "postcopy-paused"; }, 60)) << src.cmd("info migrate");
    uint16_t again = free_tcp_port();
    EXPECT_EQ(dst.cmd("migrate_recover " + tcp_uri(again)), "");
    EXPECT_EQ(src.cmd("migrate -d -r " + tcp_uri(again)), "");
    ASSERT_TRUE(eventually([&] { return dst.migrate_status() == "completed"; }, 120))
        << dst.cmd("info migrate") << dst.log() << src.cmd("info migrate") << src.log();
    ASSERT_TRUE(eventually([&] { return src.migrate_status() == "completed"; }, 30)) << src.cmd("info migrate");
}

inline uint64_t number(Vm& vm, const std::string& label) {
    std::string v = vm.migrate_field(label);
    return v.empty() ? 0 : std::stoull(v);
}

}  // namespace vmm::test

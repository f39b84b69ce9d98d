#include "vmm/devices/control.h"

#include <gtest/gtest.h>

namespace vmm::devices {

namespace {
void out32(ControlDevice& d, uint32_t cpu, uint16_t off, uint32_t v) {
    uint8_t b[4] = {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
    d.io_write(cpu, off, b);
}
uint32_t in32(ControlDevice& d, uint32_t cpu, uint16_t off) {
    uint8_t b[4] = {};
    d.io_read(cpu, off, b);
    return io_value(b);
}
void command(ControlDevice& d, uint32_t cpu, uint32_t cmd, uint64_t arg) {
    out32(d, cpu, VMMC_REG_ARG_LO_CLOCK_LO, static_cast<uint32_t>(arg));
    out32(d, cpu, VMMC_REG_ARG_HI_CLOCK_HI, static_cast<uint32_t>(arg >> 32));
    out32(d, cpu, VMMC_REG_ID_CMD, cmd);
}
}  // namespace

TEST(ControlDevice, IdentifiesItselfAndRecordsReports) {
    ControlDevice d({});
    EXPECT_EQ(in32(d, 0, VMMC_REG_ID_CMD), VMMC_ID);
    command(d, 0, VMMC_CMD_PROGRESS, 0x100000005ull);
    command(d, 0, VMMC_CMD_STEP, 7);
    command(d, 0, VMMC_CMD_RESULT, 3);
    command(d, 0, VMMC_CMD_ERROR, 0xdead);
    command(d, 0, VMMC_CMD_MAX_PAUSE, 5000);
    command(d, 0, VMMC_CMD_MAX_PAUSE, 4000);  // smaller: the maximum stays
    command(d, 0, 999, 1);                    // unknown: ignored
    auto r = d.report();
    EXPECT_EQ(r.progress, 0x100000005ull);
    EXPECT_EQ(r.steps, 7u);
    EXPECT_EQ(r.results, 1u);
    EXPECT_EQ(r.last_result, 3u);
    EXPECT_EQ(r.errors, 1u);
    EXPECT_EQ(r.last_error, 0xdeadu);
    EXPECT_EQ(r.max_pause_ns, 5000u);
}

TEST(ControlDevice, HooksRunForSleepStepExitAndMessages) {
    uint64_t slept = 0, step = 0;
    int exit_code = -1;
    std::string line;
    ControlHooks h;
    h.sleep = [&](uint32_t, uint64_t ns) { slept = ns; };
    h.step = [&](uint64_t s) { step = s; };
    h.exit = [&](uint32_t c) { exit_code = static_cast<int>(c); };
    h.message = [&](std::string_view l) { line = l; };
    ControlDevice d(h);
    command(d, 1, VMMC_CMD_SLEEP, 1000);
    command(d, 1, VMMC_CMD_STEP, 4);
    command(d, 1, VMMC_CMD_EXIT, 3);
    for (char c : std::string("ok\x01\n")) {
        uint8_t b = static_cast<uint8_t>(c);
        d.io_write(0, VMMC_REG_MESSAGE, std::span<const uint8_t>(&b, 1));
    }
    EXPECT_EQ(slept, 1000u);
    EXPECT_EQ(step, 4u);
    EXPECT_EQ(exit_code, 3);
    EXPECT_EQ(line, "ok?");  // control characters are not passed through
    EXPECT_EQ(d.report().last_message, "ok?");
}

TEST(ControlDevice, ArgumentAndClockLatchesArePerCpu) {
    uint64_t now = 0x1122334455667788ull;
    ControlHooks h;
    h.clock_ns = [&] { return now; };
    ControlDevice d(h);
    out32(d, 0, VMMC_REG_ARG_LO_CLOCK_LO, 5);
    out32(d, 1, VMMC_REG_ARG_LO_CLOCK_LO, 9);  // another CPU: must not clobber CPU 0's ARG
    out32(d, 0, VMMC_REG_ARG_HI_CLOCK_HI, 0);
    out32(d, 0, VMMC_REG_ID_CMD, VMMC_CMD_PROGRESS);
    EXPECT_EQ(d.report().progress, 5u);
    EXPECT_EQ(in32(d, 0, VMMC_REG_ARG_LO_CLOCK_LO), 0x55667788u);
    now = 0xffffffff00000000ull;
    EXPECT_EQ(in32(d, 1, VMMC_REG_ARG_LO_CLOCK_LO), 0u);
    EXPECT_EQ(in32(d, 0, VMMC_REG_ARG_HI_CLOCK_HI), 0x11223344u);  // CPU 0's latch is intact
}

TEST(ControlDevice, StateRoundTripsAndRejectsBadLatchCount) {
    ControlDevice a({});
    command(a, 0, VMMC_CMD_PROGRESS, 42);
    command(a, 3, VMMC_CMD_MAX_PAUSE, 123456);
    ByteWriter w;
    a.save(w);
    ControlDevice b({});
    ByteReader r(w.bytes(), "control");
    ASSERT_TRUE(b.load(r));
    EXPECT_TRUE(r.expect_end());
    EXPECT_EQ(a.report(), b.report());
    std::vector<uint8_t> bad = w.bytes();
    // The latch count sits right after the version, 8 counters and the two strings (empty).
    size_t off = 1 + 8 * 8 + 4 + 4;
    bad[off] = 3;
    ControlDevice c({});
    ByteReader br(bad, "control");
    EXPECT_FALSE(c.load(br));
    EXPECT_EQ(c.report().progress, 0u);
}

// The device times the gaps between a CPU's clock reads as the guest sees them: the longest
// while a migration runs, and the one across the switchover (source's last read before the
// save to the destination's first after the load).
TEST(ControlDevice, TimesTheGuestsStallsAndTheSwitchoverFromItsClockReads) {
    uint64_t now = 1'000'000;
    ControlHooks h;
    h.clock_ns = [&] { return now; };
    ControlDevice src(h);
    auto read_at = [&](ControlDevice& d, uint32_t cpu, uint64_t t) {
        now = t;
        (void)in32(d, cpu, VMMC_REG_ARG_LO_CLOCK_LO);
    };
    read_at(src, 0, 1'000'000);
    read_at(src, 0, 9'000'000);  // an 8 ms gap before any migration: not counted
    src.start_migration_window();
    read_at(src, 0, 10'000'000);
    read_at(src, 0, 13'000'000);  // 3 ms
    read_at(src, 1, 14'000'000);  // CPU 1's first read: no gap yet
    read_at(src, 0, 14'500'000);
    EXPECT_EQ(src.report().migration_stall_ns, 3'000'000u);
    EXPECT_EQ(src.report().switchover_pause_ns, 0u);
    ByteWriter w;
    src.save(w);  // CPU 0 last read at 14.5 ms, CPU 1 at 14 ms
    ControlDevice dst(h);
    ByteReader r(w.bytes(), "control");
    ASSERT_TRUE(dst.load(r));
    EXPECT_EQ(dst.report().migration_stall_ns, 3'000'000u);  // travelled with the state
    read_at(dst, 0, 60'500'000);                                 // 46 ms across the switchover
    EXPECT_EQ(dst.report().switchover_pause_ns, 46'000'000u);
    read_at(dst, 0, 160'500'000);  // later gaps are neither the switchover nor a migration's
    read_at(dst, 1, 10'000'000);   // CPU 1: a clock behind the source's (its last read: 14 ms) gives no gap
    EXPECT_EQ(dst.report().switchover_pause_ns, 46'000'000u);
    EXPECT_EQ(dst.report().migration_stall_ns, 3'000'000u);
    dst.start_migration_window();  // the next migration measures afresh
    EXPECT_EQ(dst.report().migration_stall_ns, 0u);
    EXPECT_EQ(dst.report().switchover_pause_ns, 0u);
}

// At a postcopy destination the window opens before the guest runs there: the gap across the
// switchover is the switchover's, later gaps are postcopy stalls until the window closes.
TEST(ControlDevice, TimesPostcopyStallsOnlyWhileItsWindowIsOpen) {
    uint64_t now = 0;
    ControlHooks h;
    h.clock_ns = [&now] { return now; };
    auto read_at = [&](ControlDevice& d, uint32_t cpu, uint64_t t) {
        now = t;
        (void)in32(d, cpu, VMMC_REG_ARG_LO_CLOCK_LO);
    };
    ControlDevice src(h);
    read_at(src, 0, 10'000'000);
    ByteWriter w;
    src.save(w);
    ControlDevice dst(h);
    ByteReader r(w.bytes(), "control");
    ASSERT_TRUE(dst.load(r));
    dst.postcopy_window(true);
    read_at(dst, 0, 30'000'000);  // 20 ms: the switchover
    read_at(dst, 0, 31'000'000);
    read_at(dst, 0, 39'000'000);  // 8 ms: a fault on a missing page
    read_at(dst, 0, 40'000'000);
    EXPECT_EQ(dst.report().switchover_pause_ns, 20'000'000u);
    EXPECT_EQ(dst.report().postcopy_stall_ns, 8'000'000u);
    dst.postcopy_window(false);  // every page has come
    read_at(dst, 0, 90'000'000);
    EXPECT_EQ(dst.report().postcopy_stall_ns, 8'000'000u);
    EXPECT_EQ(src.report().postcopy_stall_ns, 0u);
}

// A guest that sleeps (VMMC_CMD_SLEEP) asked for that much of the gap to its next read: only what
// the sleep overran counts, e.g. a switchover that landed in it, as guest/pattern.c counts it (the
// nested VM's pattern guests rest 20 ms a step; the device once counted the whole rest and the
// guest none of it, and their two figures for one switchover disagreed).
TEST(ControlDevice, CountsOnlyWhatASleepOverran) {
    uint64_t now = 0;
    ControlHooks h;
    h.clock_ns = [&now] { return now; };
    std::vector<uint64_t> slept;
    h.sleep = [&slept](uint32_t, uint64_t ns) { slept.push_back(ns); };
    auto read_at = [&](ControlDevice& d, uint64_t t) {
        now = t;
        (void)in32(d, 0, VMMC_REG_ARG_LO_CLOCK_LO);
    };
    ControlDevice src(h);
    src.start_migration_window();
    read_at(src, 10'000'000);
    command(src, 0, VMMC_CMD_SLEEP, 20'000'000);
    read_at(src, 30'500'000);  // woke 0.5 ms late
    EXPECT_EQ(src.report().migration_stall_ns, 500'000u);
    command(src, 0, VMMC_CMD_SLEEP, 20'000'000);  // the switchover lands in this one
    EXPECT_EQ(slept, (std::vector<uint64_t>{20'000'000, 20'000'000}));
    ByteWriter w;
    src.save(w);
    ControlDevice dst(h);
    ByteReader r(w.bytes(), "control");
    ASSERT_TRUE(dst.load(r));
    read_at(dst, 95'500'000);  // due at 50.5 ms: 45 ms overran
    EXPECT_EQ(dst.report().switchover_pause_ns, 45'000'000u);
    // A sleep cut short (a pause) leaves the next read before it was due: no gap, no wrap.
    command(dst, 0, VMMC_CMD_SLEEP, 20'000'000);
    dst.start_migration_window();
    read_at(dst, 96'000'000);
    EXPECT_EQ(dst.report().migration_stall_ns, 0u);
    // A guest's absurd sleep saturates instead of wrapping to a gap.
    command(dst, 0, VMMC_CMD_SLEEP, UINT64_MAX);
    read_at(dst, 97'000'000);
    EXPECT_EQ(dst.report().migration_stall_ns, 0u);
}

}  // namespace vmm::devices

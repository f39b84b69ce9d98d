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
    // The latch count sits right after the version, 7 counters and the two strings (empty).
    size_t off = 1 + 7 * 8 + 4 + 4;
    bad[off] = 3;
    ControlDevice c({});
    ByteReader br(bad, "control");
    EXPECT_FALSE(c.load(br));
    EXPECT_EQ(c.report().progress, 0u);
}

}  // namespace vmm::devices

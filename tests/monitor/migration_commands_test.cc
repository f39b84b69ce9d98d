// How a migration's figures read on the monitor: RDMA writes still in flight are shown apart
// from what has arrived, and only when there are some; setup is shown in its parts.
#include <gtest/gtest.h>

#include "vmm/monitor/migration_commands.h"

namespace vmm::monitor {

namespace {
migration::MigrationStats active(uint64_t arrived, uint64_t in_flight) {
    migration::MigrationStats s;
    s.status = migration::MigrationStatus::active;
    s.ram.total = 128u << 20;
    s.ram.transferred = arrived;
    s.ram.in_flight = in_flight;
    s.ram.normal = (arrived + in_flight) / 4096;
    return s;
}
}  // namespace

TEST(MigrationMonitor, InFlightBytesAreShownApartFromWhatArrived) {
    Json j = migration_stats_json(active(64u << 20, 37u << 20), {});
    EXPECT_EQ(j["ram"]["transferred"], 64u << 20);
    EXPECT_EQ(j["ram"]["x-in-flight"], 37u << 20);
    std::string text = migration_stats_text(j);
    EXPECT_NE(text.find("transferred ram: 65536 kbytes\n"), std::string::npos) << text;
    EXPECT_NE(text.find("in flight ram: 37888 kbytes\n"), std::string::npos) << text;
    std::string line = progress_line(j);
    EXPECT_NE(line.find("64 MiB arrived, 37 MiB in flight"), std::string::npos) << line;
    EXPECT_NE(line.find(" 78%"), std::string::npos) << line;  // pages handed over: 101 of 128 MiB
}

TEST(MigrationMonitor, ProgressLinesHaveOneWidthSoAShortOneOverwritesALongOne) {
    std::string longer = progress_line(migration_stats_json(active(64u << 20, 37u << 20), {}));
    std::string shorter = progress_line(migration_stats_json(active(1u << 20, 0), {}));
    EXPECT_EQ(longer.front(), '\r');
    EXPECT_EQ(longer.size(), shorter.size());
}

TEST(MigrationMonitor, NothingInFlightReadsAsBefore) {
    Json j = migration_stats_json(active(100u << 20, 0), {});
    EXPECT_EQ(migration_stats_text(j).find("in flight"), std::string::npos);
    std::string line = progress_line(j);
    EXPECT_NE(line.find("100 MiB sent "), std::string::npos) << line;
    EXPECT_EQ(line.find("in flight"), std::string::npos) << line;
}

// QEMU's ram.postcopy-requests and ram.postcopy-bytes, which libvirt and QEMU's users read.
TEST(MigrationMonitor, APostcopysRequestsAndBytesGoUnderQemusNames) {
    migration::MigrationStats s = active(64u << 20, 0);
    s.status = migration::MigrationStatus::postcopy_active;
    s.postcopy.switched = true;
    s.postcopy.requests = 12;
    s.postcopy.postcopy_bytes = 5u << 20;
    Json j = migration_stats_json(s, {});
    EXPECT_EQ(j["ram"]["postcopy-requests"], 12u);
    EXPECT_EQ(j["ram"]["postcopy-bytes"], 5u << 20);
    EXPECT_EQ(migration_stats_json(active(1, 0), {})["ram"]["postcopy-requests"], 0u) << "there before a switch too, as QEMU's";
}


// Setup's parts: vmm's steps, each with the transport's own inside it, in QMP and on one line.
TEST(MigrationMonitor, SetupPartsNestTheTransportsStepsInVmmsOwn) {
    migration::MigrationStats s = active(1u << 20, 0);
    s.setup_time_ms = 13;
    s.setup_parts = {{"start", 0.25, {}},
                     {"connect", 10.0, {{"address", 1.5, {}}, {"connection", 8.0, {}}}},
                     {"header", 2.75, {}}};
    Json j = migration_stats_json(s, {});
    ASSERT_EQ(j["x-setup-parts"].size(), 3u) << j.dump();
    EXPECT_EQ(j["x-setup-parts"][1]["name"], "connect");
    EXPECT_EQ(j["x-setup-parts"][1]["parts"][1]["ms"], 8.0);
    EXPECT_FALSE(j["x-setup-parts"][0].contains("parts")) << "a step the transport did not break down has none";
    std::string text = migration_stats_text(j);
    EXPECT_NE(text.find("setup: 13 ms\nsetup parts: start 0.2, connect 10.0 (address 1.5, connection 8.0), header 2.8 ms\n"),
              std::string::npos)
        << text;
    EXPECT_FALSE(migration_stats_json(active(1, 0), {}).contains("x-setup-parts")) << "none before setup has run";
}

}  // namespace vmm::monitor

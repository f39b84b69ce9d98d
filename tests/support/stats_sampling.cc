#include "tests/support/stats_sampling.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/support/kvm_fixture.h"
#include "tests/support/vm_pair.h"

namespace vmm::test {

using namespace std::chrono_literals;

namespace {

uint64_t u(const Json& ram, const char* key) { return ram.contains(key) ? ram[key].get<uint64_t>() : 0; }

// Checks one sample against its definitions and against the one before; returns whether it was
// taken inside the bulk round with part of RAM sent and part still to go.
bool check_sample(const Json& now, const Json& before, uint64_t total) {
    const Json& r = now["ram"];
    const Json& p = before["ram"];
    std::string where = now.dump();
    EXPECT_EQ(u(r, "total"), total) << where;
    EXPECT_LE(u(r, "remaining"), total) << where;
    EXPECT_EQ(u(r, "normal-bytes"), u(r, "normal") * 4096) << where;
    // A page counts as sent once it has gone out: never more pages than bytes that left.
    EXPECT_LE(u(r, "normal-bytes"), u(r, "transferred") + u(r, "x-in-flight")) << where;
    for (const char* k : {"transferred", "normal", "duplicate", "x-skipped-unpopulated", "dirty-sync-count"}) {
        EXPECT_GE(u(r, k), u(p, k)) << k << " went down: " << before.dump() << " then " << where;
    }
    EXPECT_GE(now["x-rounds"].get<uint64_t>(), before.value("x-rounds", uint64_t{0})) << where;
    bool bulk = now["status"] == "active" && now["x-rounds"] == 0 && u(r, "dirty-sync-count") == 1;
    if (!bulk) return false;
    // In the bulk round every page of RAM is either still to go or sent, marked zero or skipped.
    uint64_t passed = (u(r, "normal") + u(r, "duplicate") + u(r, "x-skipped-unpopulated")) * 4096;
    EXPECT_EQ(u(r, "remaining") + passed, total) << where;
    return u(r, "remaining") > 0 && u(r, "remaining") < total;
}

}  // namespace

void sample_a_capped_migration(const CappedMigration& m) {
    std::string qsock = temp_path(m.name + ".qmp");
    auto src = Vm::start(m.name + "-src", {"--guest", "idle", "-m", "64M", "--smp", "1", "--append", "tick_ms=20",
                                           "--prefill", "24M", "--qmp", "unix:" + qsock});
    auto dst = destination(m.name + "-dst", m.uri, "64M", "1");
    ASSERT_TRUE(src && dst);
    auto qmp = QmpClient::connect(qsock);
    ASSERT_TRUE(qmp);
    for (const auto& line : m.source_commands) ASSERT_EQ(src->cmd(line), "") << line;
    ASSERT_EQ(src->cmd("migrate_set_parameter max-bandwidth 12m"), "");  // ~2 s of bulk round
    ASSERT_TRUE(qmp->execute("migrate", {{"uri", m.uri}}).contains("return"));
    Json before = Json::object({{"ram", Json::object()}});
    int samples = 0, mid_bulk = 0;
    const uint64_t total = 64ull << 20;
    for (;;) {
        Json now = qmp->execute("query-migrate")["return"];
        ++samples;
        if (now["status"] != "setup") {
            if (check_sample(now, before, total)) ++mid_bulk;
            before = now;
        }
        std::string st = now["status"];
        if (st == "completed" || st == "failed" || st == "cancelled") break;
        ASSERT_LT(samples, 20000) << "the migration did not end";
        std::this_thread::sleep_for(20ms);  // the sampling interval
    }
    ASSERT_EQ(before["status"], "completed") << before.dump() << src->log() << dst->log();
    EXPECT_EQ(u(before["ram"], "remaining"), 0u);
    EXPECT_GE(mid_bulk, 3) << "too few samples caught the capped bulk round half done (" << samples << " in all)";
    expect_handover(*src, *dst);
}

}  // namespace vmm::test

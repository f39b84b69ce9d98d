// `info migrate-plan` / `x-query-migrate-plan` as a person asks it, before migrating: where it
// takes the link's rate from or why it cannot plan, and a plan that the migration it recommends
// keeps (a strategy it says ends, ends; one it says never ends is the one a guest outruns).
#include <gtest/gtest.h>

#include <string>

#include "tests/support/kvm_fixture.h"
#include "tests/support/process.h"
#include "tests/support/require.h"
#include "tests/support/vm_pair.h"

namespace vmm::test {
namespace {

// The strategy's row of a plan (null when absent).
const Json* strategy(const Json& plan, const std::string& name) {
    for (const Json& r : plan["strategies"])
        if (r["strategy"] == name) return &r;
    return nullptr;
}

}  // namespace

TEST(MigrationPlan, ItSaysWhereTheLinksRateComesFromOrHowToGiveIt) {
    VMM_REQUIRE(need::kvm());
    auto vm = Vm::start("plan-rate", {"--guest", "idle", "-m", "64M"});
    ASSERT_TRUE(vm);
    EXPECT_EQ(vm->cmd("info migrate-plan"),
              "Error: the link's rate is not known here: give it (info migrate-plan 1250m for 10 Gbit/s), set "
              "max-bandwidth, or migrate once over that link\n");
    EXPECT_EQ(vm->cmd("info migrate-plan 0"),
              "Error: bandwidth: give the link's rate in bytes/s, above 0 (e.g. 1250m for 10 Gbit/s)\n");
    std::string bad = vm->cmd("info migrate-plan fast");
    EXPECT_EQ(bad.rfind("Error: argument 'bandwidth': ", 0), 0u) << bad;
    EXPECT_EQ(std::count(bad.begin(), bad.end(), '\n'), 1) << bad;
    ASSERT_EQ(vm->cmd("migrate_set_parameter max-bandwidth 16m"), "");
    std::string plan;
    ASSERT_TRUE(eventually([&] {  // the guest's dirtying is measured a second after it starts
        plan = vm->cmd("info migrate-plan");
        return plan.find("has no measurement yet") == std::string::npos;
    }, 30)) << plan;
    EXPECT_EQ(plan.rfind("a migration of 64 MiB RAM (", 0), 0u) << plan;
    EXPECT_NE(plan.find("over a link of 16 MiB/s (max-bandwidth)"), std::string::npos) << plan;
    std::string given = vm->cmd("info migrate-plan 1g");
    EXPECT_NE(given.find("over a link of 1 GiB/s (given)"), std::string::npos) << given;
}

// A host-filled idle guest: every strategy ends; precopy sends what is populated in one round.
TEST(MigrationPlan, AnIdleGuestsPlanIsItsPopulatedBytesInOneRound) {
    VMM_REQUIRE(need::kvm());
    std::string qsock = temp_path("plan-idle.qmp");
    auto vm = Vm::start("plan-idle", {"--guest", "idle", "-m", "128M", "--prefill", "32M", "--qmp", "unix:" + qsock});
    ASSERT_TRUE(vm);
    auto qmp = QmpClient::connect(qsock);
    ASSERT_TRUE(qmp);
    Json answer;
    ASSERT_TRUE(eventually([&] {
        answer = qmp->execute("x-query-migrate-plan", {{"bandwidth", 16 << 20}});
        return answer.contains("return");
    }, 30)) << answer.dump();
    const Json& plan = answer["return"];
    EXPECT_EQ(plan["link-from"], "given");
    EXPECT_GE(plan["populated-bytes"].get<uint64_t>(), 32u << 20) << plan.dump();
    EXPECT_LT(plan["populated-bytes"].get<uint64_t>(), 40u << 20) << plan.dump();
    ASSERT_EQ(plan["dirty"]["blocks"].size(), 1u) << plan.dump();
    EXPECT_EQ(plan["dirty"]["tracking"], "log");
    EXPECT_TRUE(plan["dirty"]["vcpus"].empty()) << "the dirty log cannot tell which vCPU wrote";
    ASSERT_EQ(plan["strategies"].size(), 6u) << plan.dump();
    for (const Json& r : plan["strategies"]) EXPECT_TRUE(r["converges"].get<bool>()) << r.dump();
    const Json* p = strategy(plan, "precopy");
    ASSERT_NE(p, nullptr);
    EXPECT_LE((*p)["rounds"].get<uint32_t>(), 2u) << p->dump();
    EXPECT_EQ((*p)["needs"], "");
    const Json* limit = strategy(plan, "precopy + dirty limit");
    ASSERT_NE(limit, nullptr);
    EXPECT_EQ((*limit)["limited-vcpus"], 0u) << "an idle guest is held to nothing: " << limit->dump();
    EXPECT_EQ((*limit)["throttled-ms"], 0.0);
    EXPECT_EQ((*strategy(plan, "postcopy at once"))["needs"].get<std::string>().rfind("the capability postcopy-ram on both sides", 0), 0u);
}

// A guest rewriting more than the link moves: the plan says precopy has no end, and what would end
// it; auto-converge, which it says ends, then ends the migration with the RAM equal.
TEST(MigrationPlan, WhatThePlanSaysEndsEndsAndWhatOutrunsTheLinkDoesNot) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = Vm::start("plan-src", {"--guest", "stress", "-m", "128M", "--smp", "1", "--append",
                                      "bytes=" + sized("4M", "1M")});
    auto dst = destination("plan-dst", tcp_uri(port), "128M", "1");
    ASSERT_TRUE(src && dst);
    ASSERT_TRUE(eventually([&] { return src->guest_value("steps") >= 4; }, 60));
    std::string cap = sized("10m", "512k");
    ASSERT_EQ(src->cmd("migrate_set_parameter max-bandwidth " + cap), "");
    std::string plan;
    // Five seconds of the guest's dirtying: a whole working-set window after it began.
    ASSERT_TRUE(eventually([&] {
        plan = src->cmd("info migrate-plan");
        return plan.find("a hot set of") != std::string::npos;
    }, 60)) << plan;
    // info dirty-rate shows the windows it was found in, distinct beside written, and the set.
    std::string rate;
    ASSERT_TRUE(eventually([&] {
        rate = src->cmd("info dirty-rate");
        return rate.find("\nhot set: ") != std::string::npos && rate.find("\nhot set: none") == std::string::npos;
    }, 60)) << rate;
    EXPECT_NE(rate.find("\nworking set: 4 s "), std::string::npos) << rate;
    EXPECT_NE(rate.find(" written"), std::string::npos) << rate;
    std::string precopy = plan.substr(plan.find("\nprecopy "));
    if (!nested_tcg()) {  // there the guest's steps are too slow to be sure it outruns the cap
        ASSERT_EQ(precopy.find("\nprecopy                   no       never"), 0u) << plan;
        EXPECT_NE(precopy.find("    no end: the guest dirties "), std::string::npos) << plan;
        EXPECT_NE(precopy.find("would end it"), std::string::npos) << plan;
        // One pause carries the hot set once: it ends, paused for the limit it needs, and says
        // how to ask for it.
        std::string pause = plan.substr(plan.find("\nprecopy + one pause"));
        ASSERT_EQ(pause.find("\nprecopy + one pause       yes"), 0u) << plan;
        EXPECT_NE(pause.find(" paused "), std::string::npos) << plan;
        EXPECT_NE(pause.find("    needs: an x-deadline with x-deadline-strategy downtime and x-deadline-max-downtime of "), std::string::npos)
            << plan;
    }
    std::string converge = plan.substr(plan.find("\nprecopy + auto-converge"));
    ASSERT_EQ(converge.find("\nprecopy + auto-converge   yes"), 0u) << plan;
    EXPECT_NE(converge.find("    needs: the capability auto-converge"), std::string::npos) << plan;
    // The dirty limit holds only the vCPUs that dirty more than their share; it needs what this
    // guest has not: the dirty ring, and the deadline's strategy to set it during a migration.
    std::string limit = plan.substr(plan.find("\nprecopy + dirty limit"));
    EXPECT_NE(limit.find("    needs: the dirty ring (start vmm with --dirty-tracking ring); an x-deadline with "
                         "x-deadline-strategy dirty-limit (or set_vcpu_dirty_limit by hand)"),
              std::string::npos) << plan;
    ASSERT_EQ(src->cmd("migrate_set_capability auto-converge on"), "");
    EXPECT_EQ(src->cmd("info migrate-plan").find("needs: the capability auto-converge"), std::string::npos);
    std::string out = src->cmd("migrate " + tcp_uri(port));
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out;
    expect_handover(*src, *dst);
}

}  // namespace vmm::test

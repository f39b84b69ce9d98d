// The time a migration has left, as 'info migrate' predicts it (core/eta.h): filled from the
// first samples of a capped migration and falling as it goes; a guest that dirties faster than
// the link moves gets no promise, said with the rates and what would end it.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "tests/support/kvm_fixture.h"
#include "tests/support/require.h"
#include "tests/support/vm_pair.h"

namespace vmm::test {
namespace {

// "expected remaining: 12.3 s (...)" -> 12.3; -1 when the line says something else or is absent.
double seconds_left(Vm& vm) {
    static const std::regex form(R"(^(\d+\.\d) s \()");
    std::smatch m;
    std::string field = vm.migrate_field("expected remaining");
    return std::regex_search(field, m, form) ? std::stod(m[1]) : -1;
}

}  // namespace

TEST(MigrationEta, TheTimeLeftIsPredictedFromTheStartAndFalls) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    // 64 MiB the host filled, at 16 MB/s: a bulk round of about 4 s, an idle guest.
    auto src = Vm::start("eta-src", {"--guest", "idle", "-m", "128M", "--prefill", "64M"});
    auto dst = destination("eta-dst", tcp_uri(port), "128M", "1");
    ASSERT_TRUE(src && dst);
    ASSERT_EQ(src->cmd("migrate_set_parameter max-bandwidth 16m"), "");
    ASSERT_EQ(src->cmd("migrate -d " + tcp_uri(port)), "");
    std::vector<double> left;
    ASSERT_TRUE(eventually([&] {
        double s = seconds_left(*src);
        if (s >= 0) left.push_back(s);
        std::string st = src->migrate_status();
        return st == "completed" || st == "failed";
    }, 120)) << src->cmd("info migrate");
    ASSERT_EQ(src->migrate_status(), "completed") << src->cmd("info migrate");
    ASSERT_GE(left.size(), 3u) << "the prediction was not there while the bulk round ran";
    EXPECT_GT(left.front(), left.back()) << "the time left did not fall";
    EXPECT_GT(left.front(), 1.0) << "64 MiB at 16 MB/s take seconds";
    EXPECT_LT(left.front(), 30.0) << "64 MiB at 16 MB/s take seconds";
    EXPECT_EQ(src->migrate_field("expected remaining"), "") << "a completed migration predicts nothing";
}

TEST(MigrationEta, AGuestDirtyingFasterThanTheLinkGetsNoPromise) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = Vm::start("eta-stress-src", {"--guest", "stress", "-m", "128M", "--append", "bytes=" + sized("32M", "4M")});
    auto dst = destination("eta-stress-dst", tcp_uri(port), "128M", "1");
    ASSERT_TRUE(src && dst);
    ASSERT_TRUE(eventually([&] { return src->guest_value("steps") >= 2; }, 60));
    ASSERT_EQ(src->cmd("migrate_set_parameter max-bandwidth " + sized("2m", "256k")), "");
    ASSERT_EQ(src->cmd("migrate -d " + tcp_uri(port)), "");
    ASSERT_TRUE(eventually([&] {
        std::string st = src->migrate_status();
        return std::stoull("0" + src->migrate_field("rounds")) >= 3 || st == "failed" || st == "completed";
    }, 240)) << src->cmd("info migrate");
    ASSERT_EQ(src->migrate_status(), "active") << src->cmd("info migrate");
    // The sentence follows the rates it names: no end when the guest dirties at least as fast.
    std::string said = src->migrate_field("expected remaining");
    static const std::regex rates(R"(the guest dirties (\d+\.\d) MB/s, the link moves (\d+\.\d) MB/s)");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(said, m, rates)) << said;
    double dirty = std::stod(m[1]), link = std::stod(m[2]);
    if (!nested_tcg()) {
        EXPECT_GT(dirty, link) << "the stress guest outruns a 2 MB/s link here: " << said;
    }
    if (dirty > link * 1.05) {
        EXPECT_EQ(said.rfind("no end at these rates", 0), 0u) << said;
        EXPECT_NE(said.find("auto-converge, postcopy or a higher downtime-limit would end it"), std::string::npos);
    } else if (dirty < link * 0.95) {
        EXPECT_NE(said.find(" s ("), std::string::npos) << "rounds that shrink have an end: " << said;
    }
    ASSERT_EQ(src->cmd("migrate_cancel"), "");
    EXPECT_TRUE(eventually([&] { return src->migrate_status() == "cancelled"; }, 60));
}

}  // namespace vmm::test

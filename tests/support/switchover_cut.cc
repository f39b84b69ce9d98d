#include "tests/support/switchover_cut.h"

#include <gtest/gtest.h>

#include "tests/support/kvm_fixture.h"
#include "tests/support/vm_pair.h"
#include "tests/support/wait.h"

namespace vmm::test {

void expect_one_copy_after_a_cut(const std::string& side, int step, const std::vector<std::string>& source_settings,
                                 const std::string& dst_says) {
    SCOPED_TRACE(side + " cuts after step " + std::to_string(step));
    uint16_t port = free_tcp_port();
    auto src = Vm::start("sw-cut-src", {"--guest", "stress", "-m", "128M", "--smp", "1", "--prefill", "32M", "--append",
                                        "bytes=" + sized("2M", "512K")});
    auto dst = destination("sw-cut-dst", tcp_uri(port), "128M", "1");
    ASSERT_TRUE(src && dst);
    for (const auto& s : source_settings) ASSERT_EQ(src->cmd(s), "") << s;
    Vm& cutter = side == "src" ? *src : *dst;
    ASSERT_EQ(cutter.cmd("migrate_set_parameter x-switchover-cut " + std::to_string(step)), "");
    // A destination whose source's DONE was lost waits out the window: a short one here.
    ASSERT_EQ(src->cmd("migrate_set_parameter x-resume-window 3000"), "");
    ASSERT_EQ(dst->cmd("migrate_set_parameter x-connect-timeout " + short_connect_timeout()), "");
    std::string out = src->cmd("migrate " + tcp_uri(port));
    EXPECT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log() << dst->log();
    EXPECT_NE(cutter.log().find("x-switchover-cut " + std::to_string(step) + ": cutting"), std::string::npos) << cutter.log();
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 60)) << dst->cmd("info migrate") << dst->log();
    EXPECT_NE(src->cmd("cont").find("the guest runs on the destination now"), std::string::npos);
    if (!dst_says.empty()) {
        EXPECT_NE(dst->log().find(dst_says), std::string::npos) << dst->log();
    }
    expect_handover(*src, *dst);
}

}  // namespace vmm::test

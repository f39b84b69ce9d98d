// A guest CPU as compareHypervisorCPU gives it (vmmd/domain/cpu_xml.h).
#include "vmmd/domain/cpu_xml.h"

#include <gtest/gtest.h>

namespace vmmd {
namespace {

TEST(CpuXml, ReadsTheModeTheModelAndWhetherFeaturesAreAsked) {
    auto pass = parse_guest_cpu("<cpu mode='host-passthrough' check='none'/>");
    ASSERT_TRUE(pass) << pass.error().message();
    EXPECT_EQ(pass->mode, "host-passthrough");
    EXPECT_FALSE(pass->model);
    auto custom = parse_guest_cpu("<cpu mode='custom' match='exact'><model fallback='forbid'>Skylake-Client</model>"
                                  "<feature policy='require' name='vmx'/></cpu>");
    ASSERT_TRUE(custom);
    EXPECT_EQ(custom->model, "Skylake-Client");
    EXPECT_TRUE(custom->features);
    auto host = parse_guest_cpu("<cpu><arch>x86_64</arch><topology sockets='1' cores='2' threads='1'/></cpu>");
    ASSERT_TRUE(host);
    EXPECT_TRUE(host->mode.empty());
    EXPECT_FALSE(host->model || host->features);
}

TEST(CpuXml, RefusesWhatIsNotACpuOrHasADoctype) {
    EXPECT_FALSE(parse_guest_cpu("<domain/>"));
    EXPECT_FALSE(parse_guest_cpu("<cpu"));
    EXPECT_FALSE(parse_guest_cpu("<!DOCTYPE cpu [<!ENTITY e 'x'>]><cpu><model>&e;</model></cpu>"));
}

}  // namespace
}  // namespace vmmd

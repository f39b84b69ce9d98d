#include "vmmd/peer/peer_migration.h"

#include <gtest/gtest.h>

namespace vmmd::peer {
namespace {

TEST(PeerMigration, SelfUriNamesTheSocketEscaped) {
    EXPECT_EQ(self_uri("vmm:///system", "/run/libvirt/virtvmmd-sock"), "vmm+unix:///system?socket=/run/libvirt/virtvmmd-sock");
    EXPECT_EQ(self_uri("vmm:///session", "/tmp/a b&c=d/sock"), "vmm+unix:///session?socket=/tmp/a%20b%26c%3Dd/sock");
}

TEST(PeerMigration, AnUnreachableVmmdIsSaidByName) {
    PeerMigration m;
    m.self_uri = self_uri("vmm:///system", "/nonexistent/vmmd-sock");
    m.dest_uri = "vmm+tcp://127.0.0.1:1/system";
    m.uuid = "00000000-0000-4000-8000-000000000001";
    m.params = {{"migrate_uri", std::string("tcp://127.0.0.1:49152")}, {"bandwidth", uint64_t{5}}};
    auto s = migrate(m);
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message().find("connect to this vmmd at vmm+unix:///system?socket=/nonexistent/vmmd-sock"),
              std::string::npos)
        << s.error().message();
}

TEST(PeerMigration, AParameterLibvirtRefusesIsSaidByName) {
    PeerMigration m;
    m.self_uri = self_uri("vmm:///system", "/nonexistent/vmmd-sock");
    m.params = {{std::string(100, 'x'), int32_t{1}}};  // longer than VIR_TYPED_PARAM_FIELD_LENGTH
    auto s = migrate(m);
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message().find("migration parameter 'xxxx"), std::string::npos) << s.error().message();
}

}  // namespace
}  // namespace vmmd::peer

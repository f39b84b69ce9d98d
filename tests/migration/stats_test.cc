// query-migrate is true at every instant, over one connection and over multifd lanes
// (stats_sampling.h; over RDMA: tests/plugins/rdma-migrate).
#include <gtest/gtest.h>

#include "tests/support/require.h"
#include "tests/support/kvm_fixture.h"
#include "tests/support/stats_sampling.h"
#include "tests/support/vm_pair.h"

namespace vmm::test {

TEST(MigrationStats, TrueAtEverySampleOfACappedMigrationOverOneConnection) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    sample_a_capped_migration({"stats-tcp", tcp_uri(port), {}});
}

TEST(MigrationStats, TrueAtEverySampleOfACappedMigrationOverMultifdLanes) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    sample_a_capped_migration({"stats-mfd", tcp_uri(port), {"migrate_set_capability multifd on"}});
}

}  // namespace vmm::test

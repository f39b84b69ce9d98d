// query-migrate sampled all through a bandwidth-capped migration (the bulk round lasts seconds):
// at every sample its figures must keep their definitions (README, "info migrate"), whatever
// carries the pages (one connection, multifd lanes, a plugin's RAM channel such as RDMA).
#pragma once

#include <string>
#include <vector>

namespace vmm::test {

struct CappedMigration {
    std::string name;                          // names the VMs and the QMP socket
    std::string uri;                           // where the destination listens
    std::vector<std::string> source_commands;  // HMP lines before migrating (capabilities, parameters)
};

// Runs the migration (64 MiB guest, 24 MiB of it filled, max-bandwidth 12m) and checks every
// sample with gtest expectations; the migration must complete and hand over.
void sample_a_capped_migration(const CappedMigration& m);

}  // namespace vmm::test

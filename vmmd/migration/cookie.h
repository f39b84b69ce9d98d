// The migration cookie: what one vmmd tells the other between the steps of libvirt's version-3
// migration (Begin → Prepare → Perform → Finish → Confirm). The client library carries it
// opaquely. Ours is one JSON object: who sent it, the domain it is about, and after Perform the
// source's completed job statistics (for 'domjobinfo --completed' on the destination). A cookie
// comes from a peer: every member is checked, and an unknown version is refused.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vmm/common/result.h"
#include "vmmd/domain/domain_def.h"
#include "vmmd/migration/job_stats.h"

namespace vmmd {

struct MigrationCookie {
    std::string hostname;  // the sender's
    std::string name;      // the domain
    Uuid uuid{};
    std::optional<JobStats> stats;  // the source's, once its part is done
    bool operator==(const MigrationCookie&) const = default;
};

constexpr size_t kMaxCookie = 65536;  // ours are small; libvirt allows 4 MiB (REMOTE_MIGRATE_COOKIE_MAX)

std::vector<uint8_t> encode_cookie(const MigrationCookie& c);
// An empty cookie (a client that passes none) is nullopt; anything else must be ours.
vmm::Result<std::optional<MigrationCookie>> decode_cookie(std::span<const uint8_t> bytes);

}  // namespace vmmd

#include "vmm/migration/core/stats.h"

#include <algorithm>

namespace vmm::migration {

const char* to_string(MigrationStatus s) {
    switch (s) {
        case MigrationStatus::none: return "none";
        case MigrationStatus::setup: return "setup";
        case MigrationStatus::active: return "active";
        case MigrationStatus::device: return "device";
        case MigrationStatus::postcopy_active: return "postcopy-active";
        case MigrationStatus::postcopy_paused: return "postcopy-paused";
        case MigrationStatus::postcopy_recover: return "postcopy-recover";
        case MigrationStatus::completed: return "completed";
        case MigrationStatus::failed: return "failed";
        case MigrationStatus::cancelling: return "cancelling";
        case MigrationStatus::cancelled: return "cancelled";
        case MigrationStatus::precopy_paused: return "precopy-paused";
    }
    return "?";
}

bool is_terminal(MigrationStatus s) {
    return s == MigrationStatus::none || s == MigrationStatus::completed || s == MigrationStatus::failed ||
           s == MigrationStatus::cancelled;
}

}  // namespace vmm::migration

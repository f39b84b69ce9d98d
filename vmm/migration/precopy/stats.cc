#include "vmm/migration/precopy/stats.h"

namespace vmm::migration {

const char* to_string(MigrationStatus s) {
    switch (s) {
        case MigrationStatus::none: return "none";
        case MigrationStatus::setup: return "setup";
        case MigrationStatus::active: return "active";
        case MigrationStatus::device: return "device";
        case MigrationStatus::completed: return "completed";
        case MigrationStatus::failed: return "failed";
        case MigrationStatus::cancelling: return "cancelling";
        case MigrationStatus::cancelled: return "cancelled";
    }
    return "?";
}

bool is_terminal(MigrationStatus s) {
    return s == MigrationStatus::none || s == MigrationStatus::completed || s == MigrationStatus::failed ||
           s == MigrationStatus::cancelled;
}

}  // namespace vmm::migration

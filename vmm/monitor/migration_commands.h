// Monitor commands for migration (QEMU's names): migrate, migrate_cancel, migrate_incoming,
// migrate_set_capability/parameter, info migrate[_capabilities|_parameters], and their QMP forms.
#pragma once

#include "vmm/machine/machine.h"
#include "vmm/migration/session/manager.h"
#include "vmm/monitor/command_table.h"

namespace vmm::monitor {

// `on_incoming_failure` is what a failed incoming migration does (main ends the process).
void add_migration_commands(CommandTable& table, migration::MigrationManager& manager, machine::Machine& machine,
                            std::function<void(const Error&)> on_incoming_failure);

Json migration_stats_json(const migration::MigrationStats& s, const devices::GuestReport& guest);
std::string migration_stats_text(const Json& j);
// The per-round table of "info migrate-rounds" (from the same JSON).
std::string round_log_text(const Json& j);
// One line, "\r" first and padded to one width: "[#########-----------]  45%  120 MiB sent  812 Mbps
// round 2  active", or "… 64 MiB arrived, 37 MiB in flight …" while RDMA writes are under way.
std::string progress_line(const Json& j);

}  // namespace vmm::monitor

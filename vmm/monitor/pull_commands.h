// Monitor commands for serving a saved guest to clones that pull it (migration/transport/pull.h):
// x_pull_serve FILE URI, x_pull_serve_stop, info pull-clients, and their QMP forms.
#pragma once

#include "vmm/migration/session/manager.h"
#include "vmm/monitor/command_table.h"

namespace vmm::monitor {

void add_pull_commands(CommandTable& table, migration::MigrationManager& manager);

}  // namespace vmm::monitor

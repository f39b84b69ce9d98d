// `info migrate-plan [bandwidth]` / QMP `x-query-migrate-plan`: before a migration, what each
// strategy would cost this guest now (precopy/plan.h), from the guest's dirtying measured over the
// last seconds (per vCPU under the dirty ring, per RAM block always) and the link's rate: the one
// given, else max-bandwidth, else what the last migration measured.
#pragma once

#include "vmm/machine/machine.h"
#include "vmm/migration/session/manager.h"
#include "vmm/monitor/command_table.h"

namespace vmm::monitor {

void add_plan_command(CommandTable& table, migration::MigrationManager& manager, machine::Machine& machine);

// The text monitor's table, from the command's JSON.
std::string migrate_plan_text(const Json& j);

}  // namespace vmm::monitor

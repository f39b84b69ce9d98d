// The monitor commands that drive and inspect a Machine.
#pragma once

#include "vmm/machine/machine.h"
#include "vmm/monitor/command_table.h"

namespace vmm::monitor {

void add_machine_commands(CommandTable& table, machine::Machine& machine);
// `help`, which lists the table itself (added last so it sees every command).
void add_help_command(CommandTable& table);
// The dirty-rate sampler's working-set windows (each `window-ms`, `distinct-bytes`,
// `written-bytes`, the shortest first): what `info dirty-rate` and `info migrate-plan` show.
Json working_set_windows_json(const memory::DirtyRate& r);
// QEMU's human-monitor-command: one line of the text monitor through QMP, answered with its text
// (libvirt's `qemu-monitor-command --hmp` sends it; vmmd passes it on).
void add_human_monitor_command(CommandTable& table);

}  // namespace vmm::monitor

// The STATE record's payload: every vCPU's state, then every device's, from a paused machine.
//   u32 vcpu_count, vcpu_count x VcpuState (vmm/machine/vcpu_state.h), device section
#pragma once

#include <span>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/machine/machine.h"
#include "vmm/migration/wire/stream_format.h"
#include "vmm/migration/transport/transport.h"

namespace vmm::migration {

Result<std::vector<uint8_t>> save_machine_state(machine::Machine& m);

// The stream header that describes `m` (RAM layout, vCPUs), as either side sees itself.
StreamHeader header_for(const machine::Machine& m, RamMode mode = RamMode::inline_pages);
// What a transport is given about this migration and this machine's RAM.
TransportContext context_for(const machine::Machine& m, const Uri& uri, std::function<Options()> options,
                             const stream::CancelToken& cancel);
// Decodes and checks everything before loading anything into the machine.
Status load_machine_state(machine::Machine& m, std::span<const uint8_t> blob);
// On a destination whose guest has not run: saves its own state and loads it back, as a
// switchover will (the source saving, this side loading), and returns how long that took in
// microseconds: the fixed part of the downtime, which the source's controller adds to the
// time the remaining RAM needs. Also proves before any RAM moves that the state loads here.
Result<uint32_t> rehearse_handover(machine::Machine& m);

}  // namespace vmm::migration

// When a migration must end (vmm's x-deadline, x-deadline-strategy and x-stall-timeout, docs/
// migration.md "When it ends"), as vmmd takes it: from the migration's typed parameters
// ("vmm.deadline", "vmm.deadline_strategy", "vmm.stall_timeout": libvirt-python's migrate3 and
// the C API pass any; virsh has no option for them), else from the domain's XML
// (<vmm:migration-deadline>, <vmm:migration-deadline-strategy>, <vmm:migration-stall-timeout> in
// its <metadata><vmm:vmm>), else from vmmd's own options for all migrations
// (--migration-deadline, --migration-deadline-strategy, --migration-stall-timeout), else none.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/monitor/client/json_access.h"
#include "vmmd/domain/domain_def.h"
#include "vmmd/rpc/typed_params.h"

namespace vmmd {

inline constexpr const char* kParamDeadline = "vmm.deadline";
inline constexpr const char* kParamDeadlineStrategy = "vmm.deadline_strategy";
inline constexpr const char* kParamStallTimeout = "vmm.stall_timeout";

using DeadlineSettings = MigrationDeadline;  // domain_def.h

// The vmm migration parameters for a migration of `def` asked with `params`, over vmmd's
// `defaults`: always all three (a vmm keeps its settings from one migration to the next), each
// from the first that gives it. A bad typed parameter is an error naming it; vmm checks the values.
vmm::Result<vmm::monitor::Json> deadline_parameters(const DomainDef& def, const std::vector<rpc::TypedParam>& params,
                                                    const DeadlineSettings& defaults);

}  // namespace vmmd

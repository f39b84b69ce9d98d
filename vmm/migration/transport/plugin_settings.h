// A plugin's settings as rows of the one settings table (params.h): read from its ABI table's
// `settings` (vmm_setting), or, for a plugin built before that member, from its `capabilities`
// and `parameters` name lists (rows of unknown bounds, passed through as typed). Each row is
// checked once, when the plugin loads, so a plugin with a malformed row is refused in one line.
#pragma once

#include <string>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/migration/transport/options.h"
#include "vmm/plugin_abi.h"

namespace vmm::migration {

// `path` and the ops' scheme name the plugin in errors.
Result<std::vector<TransportSetting>> plugin_settings(const vmm_transport_ops& ops, const std::string& path);

}  // namespace vmm::migration

// Migration capabilities and parameters, with QEMU's names where QEMU has them. Parameters the
// core does not know but a transport declares (e.g. the RDMA plugin's rdma-*) are passed
// through to that transport as text.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/migration/transport/options.h"

namespace vmm::migration {

struct CapabilityInfo {
    std::string_view name;
    std::string_view help;
};

// Known names. Transport names are those of the built-in transports plus every registered plugin.
const std::vector<CapabilityInfo>& core_capabilities();
const std::vector<CapabilityInfo>& core_parameters();

// The values (Options: caps, params) with their names: what the monitors set and list. A
// migration takes a copy of the values when it starts (the engine and transports see Options).
class Settings : public Options {
public:
    // Names a transport accepts (added by the transport registry).
    void declare_transport_capability(std::string name);
    void declare_transport_parameter(std::string name);

    Status set_capability(std::string_view name, bool on);
    // `value` as typed: sizes for max-bandwidth ("40g"), integers elsewhere.
    Status set_parameter(std::string_view name, std::string_view value);
    std::vector<std::pair<std::string, bool>> capability_list() const;
    std::vector<std::pair<std::string, std::string>> parameter_list() const;

private:
    std::vector<std::string> transport_caps_;
    std::vector<std::string> transport_params_;
};

}  // namespace vmm::migration

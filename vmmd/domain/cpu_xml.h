// A guest CPU as libvirt describes one (<cpu mode=… match=…><model>…</model><feature …/></cpu>,
// what compareHypervisorCPU and baselineHypervisorCPU take): read with libxml2, no DOCTYPE.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "vmm/common/result.h"

namespace vmmd {

struct GuestCpu {
    std::string mode;                  // host-passthrough, maximum, host-model, custom ("" when not said)
    std::optional<std::string> model;  // <model>
    bool features = false;             // any <feature> asked for
};

// Also takes a host CPU as capabilities describe it (<cpu><arch>…</arch>…</cpu>).
vmm::Result<GuestCpu> parse_guest_cpu(std::string_view xml);

}  // namespace vmmd

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

namespace vmm::migration {

struct Capabilities {
    bool auto_converge = false;
    bool zero_blocks = true;  // zero pages travel as markers; off sends them as data
    bool events = true;       // MIGRATION events on the JSON monitor
    bool zero_copy_send = true;  // tcp/unix: guest RAM spliced into the socket, not copied (to a remote peer)
    bool zero_copy_local = false;  // ... also to a peer on this host, where copying measured faster
    bool multifd = false;        // tcp/unix: RAM over multifd-channels extra connections
    bool verify_ram = false;     // every page carries an XXH3-64 the destination checks (costs > 5 % on loopback)
    std::map<std::string, bool> transport;  // e.g. rdma-pin-all
};

struct Parameters {
    uint64_t max_bandwidth = 0;          // bytes/s, 0 = unlimited
    uint64_t downtime_limit_ms = 300;
    uint64_t cpu_throttle_initial = 20;  // percent
    uint64_t cpu_throttle_increment = 10;
    uint64_t max_cpu_throttle = 99;
    uint64_t throttle_after_rounds = 2;  // dirty rounds that failed to converge before throttling
    uint64_t connect_timeout_ms = 10000;
    uint64_t io_timeout_ms = 30000;      // silence from the peer longer than this fails the migration
    uint64_t multifd_channels = 2;       // lanes when the multifd capability is on (QEMU's default)
    std::map<std::string, std::string> transport;  // e.g. rdma-chunk-size
};

struct CapabilityInfo {
    std::string_view name;
    std::string_view help;
};

// Known names. Transport names are those of the built-in transports plus every registered plugin.
const std::vector<CapabilityInfo>& core_capabilities();
const std::vector<CapabilityInfo>& core_parameters();

class Settings {
public:
    Capabilities caps;
    Parameters params;
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

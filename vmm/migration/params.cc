#include "vmm/migration/params.h"

#include <fmt/format.h>

#include <algorithm>

#include "vmm/common/units.h"

namespace vmm::migration {

const std::vector<CapabilityInfo>& core_capabilities() {
    static const std::vector<CapabilityInfo> k = {
        {"auto-converge", "throttle the vCPUs when dirty rounds do not converge"},
        {"zero-blocks", "send zero pages as markers instead of data"},
        {"events", "emit MIGRATION events on the JSON monitor"},
        {"zero-copy-send", "tcp/unix: splice guest RAM into the socket instead of copying it (to a remote destination)"},
        {"x-zero-copy-local", "with zero-copy-send: splice to a destination on this host too (slower there)"},
        {"multifd", "tcp/unix: send RAM over multifd-channels connections, one thread each side"},
        {"verify-ram", "checksum every page record (XXH3) on the source, check it on the destination"},
        {"postcopy-ram", "both sides: allow switching to postcopy (migrate_start_postcopy, x-postcopy-after-rounds)"},
        {"postcopy-preempt", "tcp/unix, both sides, with postcopy-ram (on): the pages faults wait on go on a connection of their own, never behind the background push"},
    };
    return k;
}

const std::vector<CapabilityInfo>& core_parameters() {
    static const std::vector<CapabilityInfo> k = {
        {"max-bandwidth", "bandwidth cap in bytes/s (40g, 512m; 0 = unlimited)"},
        {"downtime-limit", "longest acceptable pause, ms"},
        {"cpu-throttle-initial", "first throttle step, percent"},
        {"cpu-throttle-increment", "further throttle steps, percent"},
        {"max-cpu-throttle", "throttle ceiling, percent"},
        {"x-throttle-after-rounds", "dirty rounds that fail to converge before throttling starts"},
        {"x-connect-timeout", "connect timeout, ms"},
        {"x-io-timeout", "peer silence that fails a migration, ms"},
        {"multifd-channels", "connections for RAM when multifd is on (1 to 16)"},
        {"x-postcopy-after-rounds", "with postcopy-ram: switch to postcopy after this many rounds, the bulk round included (0 = only on migrate_start_postcopy)"},
        {"max-postcopy-bandwidth", "bandwidth cap of postcopy's background push in bytes/s (0 = unlimited; requested pages are never held back)"},
        {"x-postcopy-readahead", "postcopy: after page requests in order, the push sends up to this many bytes past them at once, not held back by max-postcopy-bandwidth but counted against it (0 = none)"},
    };
    return k;
}

void Settings::declare_transport_capability(std::string name) {
    if (std::find(transport_caps_.begin(), transport_caps_.end(), name) == transport_caps_.end())
        transport_caps_.push_back(std::move(name));
}

void Settings::declare_transport_parameter(std::string name) {
    if (std::find(transport_params_.begin(), transport_params_.end(), name) == transport_params_.end())
        transport_params_.push_back(std::move(name));
}

Status Settings::set_capability(std::string_view name, bool on) {
    if (name == "auto-converge") caps.auto_converge = on;
    else if (name == "zero-blocks") caps.zero_blocks = on;
    else if (name == "events") caps.events = on;
    else if (name == "zero-copy-send") caps.zero_copy_send = on;
    else if (name == "x-zero-copy-local") caps.zero_copy_local = on;
    else if (name == "multifd") caps.multifd = on;
    else if (name == "verify-ram") caps.verify_ram = on;
    else if (name == "postcopy-ram") caps.postcopy_ram = on;
    else if (name == "postcopy-preempt") caps.postcopy_preempt = on;
    else if (std::find(transport_caps_.begin(), transport_caps_.end(), name) != transport_caps_.end())
        caps.transport[std::string(name)] = on;
    else return Error(fmt::format("unknown migration capability '{}'; 'info migrate_capabilities' lists them", name));
    return {};
}

static Result<uint64_t> bounded(std::string_view name, std::string_view value, uint64_t min, uint64_t max) {
    auto v = parse_uint(value);
    if (!v || *v < min || *v > max) {
        return Error(fmt::format("migration parameter '{}' must be an integer from {} to {}, got '{}'", name, min, max, value));
    }
    return *v;
}

Status Settings::set_parameter(std::string_view name, std::string_view value) {
    struct Int {
        std::string_view name;
        uint64_t* target;
        uint64_t min, max;
    };
    const Int ints[] = {
        {"downtime-limit", &params.downtime_limit_ms, 1, 2000000},
        {"cpu-throttle-initial", &params.cpu_throttle_initial, 1, 99},
        {"cpu-throttle-increment", &params.cpu_throttle_increment, 1, 99},
        {"max-cpu-throttle", &params.max_cpu_throttle, 1, 99},
        {"x-throttle-after-rounds", &params.throttle_after_rounds, 1, 1000},
        {"x-connect-timeout", &params.connect_timeout_ms, 100, 3600000},
        {"x-io-timeout", &params.io_timeout_ms, 100, 3600000},
        {"multifd-channels", &params.multifd_channels, 1, 16},
        {"x-postcopy-after-rounds", &params.postcopy_after_rounds, 0, 1000},
    };
    const Int sizes[] = {  // sizes with k/m/g
        {"max-bandwidth", &params.max_bandwidth, 0, UINT64_MAX},
        {"max-postcopy-bandwidth", &params.max_postcopy_bandwidth, 0, UINT64_MAX},
        {"x-postcopy-readahead", &params.postcopy_readahead, 0, uint64_t{1} << 30},
    };
    for (const auto& z : sizes) {
        if (z.name != name) continue;
        auto v = parse_size(value);
        if (!v) return Error(fmt::format("migration parameter '{}': {}", name, v.error().message()));
        if (*v > z.max) return Error(fmt::format("migration parameter '{}': {} is more than {} bytes", name, value, z.max));
        *z.target = *v;
        return {};
    }
    for (const auto& i : ints) {
        if (i.name != name) continue;
        auto v = bounded(name, value, i.min, i.max);
        if (!v) return v.error();
        *i.target = *v;
        return {};
    }
    if (std::find(transport_params_.begin(), transport_params_.end(), name) != transport_params_.end()) {
        params.transport[std::string(name)] = std::string(value);
        return {};
    }
    return Error(fmt::format("unknown migration parameter '{}'; 'info migrate_parameters' lists them", name));
}

std::vector<std::pair<std::string, bool>> Settings::capability_list() const {
    std::vector<std::pair<std::string, bool>> out = {
        {"auto-converge", caps.auto_converge}, {"zero-blocks", caps.zero_blocks}, {"events", caps.events},
        {"zero-copy-send", caps.zero_copy_send}, {"x-zero-copy-local", caps.zero_copy_local},
        {"multifd", caps.multifd}, {"verify-ram", caps.verify_ram}, {"postcopy-ram", caps.postcopy_ram},
        {"postcopy-preempt", caps.postcopy_preempt}};
    for (const auto& n : transport_caps_) {
        auto it = caps.transport.find(n);
        out.emplace_back(n, it != caps.transport.end() && it->second);
    }
    return out;
}

std::vector<std::pair<std::string, std::string>> Settings::parameter_list() const {
    std::vector<std::pair<std::string, std::string>> out = {
        {"max-bandwidth", std::to_string(params.max_bandwidth)},
        {"downtime-limit", std::to_string(params.downtime_limit_ms)},
        {"cpu-throttle-initial", std::to_string(params.cpu_throttle_initial)},
        {"cpu-throttle-increment", std::to_string(params.cpu_throttle_increment)},
        {"max-cpu-throttle", std::to_string(params.max_cpu_throttle)},
        {"x-throttle-after-rounds", std::to_string(params.throttle_after_rounds)},
        {"x-connect-timeout", std::to_string(params.connect_timeout_ms)},
        {"x-io-timeout", std::to_string(params.io_timeout_ms)},
        {"multifd-channels", std::to_string(params.multifd_channels)},
        {"x-postcopy-after-rounds", std::to_string(params.postcopy_after_rounds)},
        {"max-postcopy-bandwidth", std::to_string(params.max_postcopy_bandwidth)},
        {"x-postcopy-readahead", std::to_string(params.postcopy_readahead)},
    };
    for (const auto& n : transport_params_) {
        auto it = params.transport.find(n);
        out.emplace_back(n, it != params.transport.end() ? it->second : "");
    }
    return out;
}

}  // namespace vmm::migration

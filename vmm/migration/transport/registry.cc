#include "vmm/migration/transport/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "vmm/migration/transport/file_transport.h"
#include "vmm/migration/transport/pull_transport.h"
#include "vmm/migration/transport/socket_transport.h"

namespace vmm::migration {

TransportRegistry::TransportRegistry() {
    add(make_tcp_transport());
    add(make_unix_transport());
    add(make_file_transport());
}

TransportRegistry::~TransportRegistry() = default;

void TransportRegistry::add(std::unique_ptr<Transport> t) {
    std::string s = t->scheme();
    std::lock_guard lock(mutex_);
    transports_[s] = std::move(t);
}

SearchPath TransportRegistry::plugin_search_path() { return search_path("VMM_PLUGIN_DIR", {"lib/vmm", "lib"}); }

Result<std::string> TransportRegistry::find_plugin(const std::string& scheme) {
    constexpr std::string_view pull = "-pull";  // "rdma-pull": the rdma plugin pulling
    if (scheme.size() > pull.size() && scheme.ends_with(pull)) {
        std::string under = scheme.substr(0, scheme.size() - pull.size());
        if (built_in(under)) return Error(fmt::format("'{}:' cannot pull a saved guest (rdma can: rdma-pull:HOST:PORT)", under));
        return find_plugin(under);
    }
    std::string file = "vmm-transport-" + scheme + ".so";
    SearchPath path = plugin_search_path();
    if (auto found = path.find(file)) return *found;
    return Error(fmt::format("no transport for '{}:': {} is not in {} (build it, or set VMM_PLUGIN_DIR)", scheme, file,
                             path.describe()));
}

std::vector<std::string> TransportRegistry::plugin_schemes() {
    constexpr std::string_view prefix = "vmm-transport-", suffix = ".so";
    std::vector<std::string> out;
    for (const auto& dir : plugin_search_path().dirs) {
        std::error_code ec;
        for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
            std::string f = entry.path().filename().string();
            if (f.size() <= prefix.size() + suffix.size() || !f.starts_with(prefix) || !f.ends_with(suffix)) continue;
            std::string scheme = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
            if (!built_in(scheme) && std::find(out.begin(), out.end(), scheme) == out.end()) out.push_back(scheme);
        }
    }
    return out;
}

Result<Transport*> TransportRegistry::get(const std::string& scheme) {
    std::lock_guard lock(mutex_);
    return get_locked(scheme);
}

Result<Transport*> TransportRegistry::get_locked(const std::string& scheme) {
    if (auto it = transports_.find(scheme); it != transports_.end()) return it->second.get();
    // "rdma-pull": the rdma transport pulling (pull_transport.h), where it can.
    constexpr std::string_view pull = "-pull";
    if (scheme.size() > pull.size() && scheme.ends_with(pull)) {
        std::string under = scheme.substr(0, scheme.size() - pull.size());
        auto base = get_locked(under);
        if (!base) return base.error();
        if (!(*base)->pulls()) return Error(fmt::format("'{}:' cannot pull a saved guest (rdma can: rdma-pull:HOST:PORT)", under));
        auto t = make_pull_transport(**base);
        Transport* raw = t.get();
        transports_[scheme] = std::move(t);
        return raw;
    }
    auto path = find_plugin(scheme);
    if (!path) return path.error();
    auto t = load_transport_plugin(*path, scheme);
    if (!t) return t.error();
    Transport* raw = t->get();
    transports_[scheme] = std::move(*t);
    return raw;
}

}  // namespace vmm::migration

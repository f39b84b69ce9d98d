#include "vmm/migration/transport/registry.h"

#include <fmt/format.h>

#include "vmm/migration/transport/file_transport.h"
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
    transports_[s] = std::move(t);
}

SearchPath TransportRegistry::plugin_search_path() { return search_path("VMM_PLUGIN_DIR", {"lib/vmm", "lib"}); }

Result<std::string> TransportRegistry::find_plugin(const std::string& scheme) {
    std::string file = "vmm-transport-" + scheme + ".so";
    SearchPath path = plugin_search_path();
    if (auto found = path.find(file)) return *found;
    return Error(fmt::format("no transport for '{}:': {} is not in {} (build it, or set VMM_PLUGIN_DIR)", scheme, file,
                             path.describe()));
}

Result<Transport*> TransportRegistry::get(const std::string& scheme) {
    if (auto it = transports_.find(scheme); it != transports_.end()) return it->second.get();
    auto path = find_plugin(scheme);
    if (!path) return path.error();
    auto t = load_transport_plugin(*path, scheme);
    if (!t) return t.error();
    Transport* raw = t->get();
    transports_[scheme] = std::move(*t);
    return raw;
}

}  // namespace vmm::migration

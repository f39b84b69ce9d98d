#include "vmm/migration/registry.h"

#include <fmt/format.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "vmm/migration/socket_transport.h"

namespace vmm::migration {

namespace fs = std::filesystem;

TransportRegistry::TransportRegistry() {
    add(make_tcp_transport());
    add(make_unix_transport());
}

TransportRegistry::~TransportRegistry() = default;

void TransportRegistry::add(std::unique_ptr<Transport> t) {
    std::string s = t->scheme();
    transports_[s] = std::move(t);
}

std::vector<std::string> TransportRegistry::plugin_dirs() {
    std::vector<std::string> dirs;
    if (const char* env = std::getenv("VMM_PLUGIN_DIR"); env != nullptr && *env != '\0') dirs.emplace_back(env);
    char exe[PATH_MAX];
    ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        fs::path prefix = fs::path(exe).parent_path().parent_path();
        dirs.push_back((prefix / "lib" / "vmm").string());
        dirs.push_back((prefix / "lib").string());
    }
    return dirs;
}

Result<std::string> TransportRegistry::find_plugin(const std::string& scheme) {
    std::string file = "vmm-transport-" + scheme + ".so";
    std::string searched;
    for (const auto& dir : plugin_dirs()) {
        fs::path p = fs::path(dir) / file;
        searched += (searched.empty() ? "" : ", ") + dir;
        if (fs::exists(p)) return p.string();
    }
    return Error(fmt::format("no transport for '{}:': {} is not in {} (build it, or set VMM_PLUGIN_DIR)", scheme, file,
                             searched));
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

// TransportRegistry: the transport for a URI scheme, built in (tcp, unix, file) or loaded from a
// plugin (vmm-transport-SCHEME.so, see include/vmm/plugin_abi.h) the first time the scheme is used.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/common/search_path.h"
#include "vmm/migration/transport/transport.h"

namespace vmm::migration {

class TransportRegistry {
public:
    TransportRegistry();
    ~TransportRegistry();

    // A missing plugin is one line naming the scheme and the paths searched. Any thread (an
    // incoming migration's finds its x-fallback-uri's transport); a transport stays for good.
    Result<Transport*> get(const std::string& scheme);
    void add(std::unique_ptr<Transport> t);
    // $VMM_PLUGIN_DIR, then <prefix of vmm>/lib/vmm, then <prefix>/lib.
    static SearchPath plugin_search_path();
    // The plugin file for a scheme that is not built in; the error names the paths searched.
    static Result<std::string> find_plugin(const std::string& scheme);
    static bool built_in(const std::string& scheme) { return scheme == "tcp" || scheme == "unix" || scheme == "file"; }
    // The schemes whose plugins are in the search path (vmm-transport-SCHEME.so), each once.
    static std::vector<std::string> plugin_schemes();

private:
    Result<Transport*> get_locked(const std::string& scheme);  // under mutex_

    std::mutex mutex_;
    std::map<std::string, std::unique_ptr<Transport>> transports_;
};

// Loads one plugin file and checks its table (ABI version, size, scheme, functions).
Result<std::unique_ptr<Transport>> load_transport_plugin(const std::string& path, const std::string& scheme);

}  // namespace vmm::migration

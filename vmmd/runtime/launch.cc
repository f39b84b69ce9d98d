#include "vmmd/runtime/launch.h"

#include <fmt/format.h>

namespace vmmd {

std::vector<std::string> vmm_arguments(const DomainDef& def, const Launch& launch) {
    std::vector<std::string> a = {launch.vmm,
                                  "--name", def.name,
                                  "-m", fmt::format("{}K", def.memory_kib),
                                  "--smp", std::to_string(def.vcpus),
                                  "--dirty-tracking", def.dirty_tracking,
                                  "--serial", def.serial_file ? "file:" + *def.serial_file : "none",
                                  "--monitor", "none",
                                  "--qmp", "unix:" + launch.qmp_socket};
    if (launch.incoming.empty()) {
        a.insert(a.end(), {"--guest", def.kernel});
        if (!def.cmdline.empty()) a.insert(a.end(), {"--append", def.cmdline});
    } else {
        a.insert(a.end(), {"--incoming", launch.incoming});
    }
    if (def.prealloc) a.emplace_back("--mem-prealloc");
    if (launch.paused) a.emplace_back("-S");
    return a;
}

std::optional<uint64_t> memlock_limit(const DomainDef& def) {
    if (!def.hard_limit_kib) return std::nullopt;
    return *def.hard_limit_kib * 1024;
}

}  // namespace vmmd

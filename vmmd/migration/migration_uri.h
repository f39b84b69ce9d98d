// Migration URIs as libvirt's clients write them (--migrateuri tcp://HOST:PORT, rdma://HOST:PORT,
// or QEMU's older tcp:HOST:PORT) and as vmm takes them (tcp:HOST:PORT, rdma:HOST:PORT). IPv6
// hosts are bracketed in both. Pure: text in, values out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vmm/common/result.h"

namespace vmmd {

struct MigrationUri {
    std::string scheme;  // tcp or rdma
    std::string host;    // without brackets
    uint16_t port = 0;   // 0: none given (the destination picks one)
    // A second way to the same destination, as the URI's query (rdma://A:1?fallback=tcp://A:2,
    // its ':' and '/' escaped or not), port given: a precopy whose link breaks may go on there
    // (vmm's x-fallback-uri, set at both ends). None or one; its own has none.
    std::vector<MigrationUri> fallback;
    bool rdma() const { return scheme == "rdma"; }
};

// HOST, HOST:PORT or [V6ADDR]:PORT (port 0: none given), as migration URIs and vmmd's
// --listen-tcp write them; errors start with `what`.
struct HostPort {
    std::string host;  // without brackets
    uint16_t port = 0;
};
vmm::Result<HostPort> parse_host_port(const std::string& text, const std::string& what);

vmm::Result<MigrationUri> parse_migration_uri(const std::string& text);
std::string vmm_uri(const MigrationUri& u);      // tcp:HOST:PORT, as vmm --incoming and migrate take it (its fallback apart)
std::string vmm_fallback_uri(const MigrationUri& u);  // the fallback's, as vmm's x-fallback-uri takes it; "" for none
std::string libvirt_uri(const MigrationUri& u);  // tcp://HOST:PORT[?fallback=URI], as libvirt's clients write it

}  // namespace vmmd

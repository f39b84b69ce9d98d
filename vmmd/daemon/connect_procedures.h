// The remote program's connection-level procedures: open and close, authentication (none:
// the socket's permissions decide who connects), feature probes, and what the host and the
// driver are (type, versions, hostname, URI, node info).
#pragma once

#include <string>
#include <vector>

#include "vmmd/rpc/dispatch.h"

namespace vmmd {

struct DriverIdentity {
    std::string default_uri;  // vmm:///system or vmm:///session, for an open without a name
    uint64_t version = 0;     // major * 1000000 + minor * 1000 + micro
};

std::vector<rpc::Procedure> connect_procedures(const DriverIdentity& id);

// This host's name (gethostname), "localhost" when it has none.
std::string local_hostname();

// "1.2.3" → 1002003 (libvirt's version numbers); 0 if it does not parse.
uint64_t libvirt_version_number(const std::string& dotted);

}  // namespace vmmd

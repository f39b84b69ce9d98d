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
    std::string emulator;     // the vmm executable, as capabilities name a guest's emulator
};

// The host's CPUs and memory, from /proc (NODE_GET_INFO, capabilities).
struct NodeInfo {
    uint64_t memory_kib = 0;
    int32_t cpus = 0, mhz = 0, nodes = 1, sockets = 1, cores = 1, threads = 1;
};
NodeInfo read_node_info();

// CONNECT_GET_CAPABILITIES: libvirt's capabilities document for this host: its CPU architecture
// and topology (one NUMA cell with its memory and every CPU), migration over tcp and rdma, and
// one guest type, hvm on x86_64 run by `emulator`, domain type vmm.
std::string capabilities_xml(const NodeInfo& node, const std::string& emulator);

std::vector<rpc::Procedure> connect_procedures(const DriverIdentity& id);

// This host's name (gethostname), "localhost" when it has none.
std::string local_hostname();

// "1.2.3" → 1002003 (libvirt's version numbers); 0 if it does not parse.
uint64_t libvirt_version_number(const std::string& dotted);

}  // namespace vmmd

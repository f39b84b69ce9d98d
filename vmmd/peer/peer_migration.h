// The source vmmd as the client of the destination's, for a peer-to-peer migration (virsh
// migrate --p2p). libvirt's public API has no call for one step of the version-3 protocol, so
// vmmd does what a client does: it opens the destination's URI and a second connection to itself
// through libvirt's client library (libvirt-dev), and lets virDomainMigrate3 run Begin3,
// Prepare3, Perform3, Finish3 and Confirm3 between the two. Every step lands on the same
// procedures a client-driven migration uses (docs/libvirt.md has the sequence).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vmm/common/result.h"
#include "vmmd/rpc/typed_params.h"

namespace vmmd::peer {

struct PeerMigration {
    std::string self_uri;   // this vmmd's own read-write socket, vmm+unix:///system?socket=PATH
    std::string dest_uri;   // the destination's, as the client named it (dconnuri)
    std::string uuid;       // the domain, in libvirt's text form
    std::vector<rpc::TypedParam> params;
    uint32_t flags = 0;     // without VIR_MIGRATE_PEER2PEER: each step is a client-driven one
};

// Runs the migration to its end. The error is libvirt's own message from whichever step failed
// (connecting to the destination, or a step the destination or this vmmd refused).
vmm::Status migrate(const PeerMigration& m);

// The URI of a vmmd's own socket: vmm+unix:///PATH?socket=SOCKET (PATH from `default_uri`, the
// socket's characters percent-encoded where a URI needs it).
std::string self_uri(const std::string& default_uri, const std::string& socket);

}  // namespace vmmd::peer

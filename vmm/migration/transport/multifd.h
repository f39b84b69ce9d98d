// Multifd: the RAM channel of the socket transports when the `multifd` capability is on. The
// pages of every round travel over `multifd-channels` lane connections, in the stream's own
// PAGES / ZERO records, each lane ending the round with its own ROUND_END; the main connection
// carries everything else. One thread per lane on each side, so the kernel's work on each
// connection (the receiver's copy into fresh guest pages, above all) runs on every core.
// Within a round every page is sent at most once, so the lanes need no order among
// themselves; rounds are ordered by the destination, which serves the next round only after
// every lane has ended this one.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "vmm/migration/wire/multifd_wire.h"
#include "vmm/migration/transport/socket_stream.h"
#include "vmm/migration/transport/transport.h"

namespace vmm::migration {

using Lanes = std::vector<std::unique_ptr<SocketStream>>;
using OpenFd = std::function<Result<UniqueFd>()>;

// Whether the peer of a connected socket is on this host (loopback address, or a unix socket).
bool peer_on_this_host(int fd);
// A stream over `fd` with the migration's timeouts, cancel token and zero-copy setting (which
// splices only to a peer on another host unless x-zero-copy-local is on).
std::unique_ptr<SocketStream> make_socket_stream(UniqueFd fd, const TransportContext& ctx, std::string peer);

// The connections beside the main one: multifd's lanes, and postcopy-preempt's connection for
// the pages postcopy's faults wait on (so they never queue behind the background push).
struct SideConnections {
    Lanes lanes;
    std::unique_ptr<SocketStream> preempt;
};

// Source: sends the preface on `main`, then opens `count` lanes and, with `preempt`, the
// preempt connection, with `connect` (to the same address), and greets each.
Result<SideConnections> open_side_connections(SocketStream& main, uint32_t count, bool preempt, const OpenFd& connect,
                                              const TransportContext& ctx);
// Destination, after the first connection was accepted: reads its first bytes. An ordinary
// stream gets them back (the migration core reads the header); a preface makes it accept and
// check the connections it announces with `accept` and returns them (none: a plain stream).
Result<SideConnections> accept_side_connections(SocketStream& main, const OpenFd& accept, const TransportContext& ctx);

// Source side: `lanes` are connected and have sent their hellos. With `verify`, each lane sends
// PAGES_SUMMED records, hashing the pages on its own thread.
std::unique_ptr<SourceRamChannel> make_source_lanes(Lanes lanes, std::vector<RamBlockView> blocks, bool verify);
// Destination side: `lanes` are accepted and their hellos checked, in index order.
std::unique_ptr<DestRamChannel> make_dest_lanes(Lanes lanes, std::vector<RamBlockView> blocks);

}  // namespace vmm::migration

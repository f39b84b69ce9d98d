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

#include "vmm/common/fd.h"
#include "vmm/migration/wire/multifd_wire.h"
#include "vmm/migration/transport/transport.h"

namespace vmm::migration {

// A connection's streams: any ByteStream (a socket's, socket_stream.h; a TLS session over one).
using Lanes = std::vector<std::unique_ptr<stream::ByteStream>>;
// Opens (source) or accepts (destination) one more connection to the same peer, as a stream
// with the migration's settings (`peer` names it in errors).
using OpenStream = std::function<Result<std::unique_ptr<stream::ByteStream>>(std::string peer)>;

// The connections beside the main one: multifd's lanes, and postcopy-preempt's connection for
// the pages postcopy's faults wait on (so they never queue behind the background push).
struct SideConnections {
    Lanes lanes;
    std::unique_ptr<stream::ByteStream> preempt;
};

// Source: sends the preface on `main`, then opens `count` lanes and, with `preempt`, the
// preempt connection, with `connect` (to the same peer), and greets each.
Result<SideConnections> open_side_connections(stream::ByteStream& main, uint32_t count, bool preempt, const OpenStream& connect);
// Destination, after the first connection was accepted: reads its first bytes. An ordinary
// stream gets them back (unread: the migration core reads the header); a preface makes it
// accept and check the connections it announces with `accept` and returns them (none: a plain
// stream).
Result<SideConnections> accept_side_connections(stream::ByteStream& main, const OpenStream& accept);

// Source side: `lanes` are connected and have sent their hellos. With `verify`, each lane sends
// PAGES_SUMMED records, hashing the pages on its own thread.
std::unique_ptr<SourceRamChannel> make_source_lanes(Lanes lanes, std::vector<RamBlockView> blocks, bool verify);
// Destination side: `lanes` are accepted and their hellos checked, in index order.
std::unique_ptr<DestRamChannel> make_dest_lanes(Lanes lanes, std::vector<RamBlockView> blocks);

}  // namespace vmm::migration

// The built-in transports: tcp:HOST:PORT (IPv4, IPv6 in brackets, names) and unix:PATH.
// Both carry RAM inline in the byte stream, or over multifd lanes (multifd.h) with the
// multifd capability.
#pragma once

#include <memory>

#include "vmm/migration/transport/transport.h"

namespace vmm::migration {

std::unique_ptr<Transport> make_tcp_transport();
std::unique_ptr<Transport> make_unix_transport();

// A stream over the connected socket `fd` with the migration's timeouts, cancel token and
// zero-copy setting (which splices only to a peer on another host unless x-zero-copy-local is
// on). The one place a migration's sockets become streams: the rest of migration/ sees a
// stream::ByteStream.
std::unique_ptr<stream::ByteStream> make_socket_stream(UniqueFd fd, const TransportContext& ctx, std::string peer);

}  // namespace vmm::migration

// The built-in transports: tcp:HOST:PORT (IPv4, IPv6 in brackets, names) and unix:PATH.
// Both carry RAM inline in the byte stream, or over multifd lanes (multifd.h) with the
// multifd capability.
#pragma once

#include <memory>

#include "vmm/migration/transport/transport.h"

namespace vmm::migration {

std::unique_ptr<Transport> make_tcp_transport();
std::unique_ptr<Transport> make_unix_transport();

}  // namespace vmm::migration

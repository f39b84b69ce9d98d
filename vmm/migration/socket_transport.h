// The built-in transports: tcp:HOST:PORT (IPv4, IPv6 in brackets, names) and unix:PATH.
// Both carry RAM inline in the byte stream.
#pragma once

#include <memory>

#include "vmm/migration/transport.h"

namespace vmm::migration {

std::unique_ptr<Transport> make_tcp_transport();
std::unique_ptr<Transport> make_unix_transport();

}  // namespace vmm::migration

// Migration URIs: "tcp:HOST:PORT" (IPv4, name, or [IPv6]), "unix:PATH", "rdma:HOST:PORT",
// "file:PATH[,offset=N]" (a saved guest, from byte N of the file), any other "scheme:..." (served
// by a plugin), and "defer" for --incoming.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "vmm/common/result.h"

namespace vmm::migration {

struct Uri {
    std::string scheme;  // "tcp", "unix", "rdma", ... ; "defer" for a deferred incoming
    std::string host;    // without brackets for IPv6
    uint16_t port = 0;
    std::string path;    // unix sockets, files
    uint64_t offset = 0; // file: where the save starts in the file (a multiple of 4096)
    std::string text;    // as typed
};

Result<Uri> parse_uri(std::string_view text);
// "HOST:PORT" or "[V6]:PORT" (used by tcp and rdma).
Status parse_host_port(std::string_view text, Uri& out);

}  // namespace vmm::migration

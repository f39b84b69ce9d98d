// Socket I/O every client and server in the project shares; `peer` names the other end in
// errors ("the monitor", "a client").
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "vmm/common/result.h"

namespace vmm {

// Sends all of `bytes` (a closed peer is an error, never SIGPIPE; a send timeout set on the
// socket ends it with an error too).
Status send_all(int fd, std::string_view bytes, const std::string& peer);
// Whether `fd` has something to read (or the peer closed) within `timeout`.
Result<bool> readable_within(int fd, std::chrono::milliseconds timeout, const std::string& peer);

}  // namespace vmm

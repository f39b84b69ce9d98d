// HmpClient: the client side of the text monitor on a unix socket (used by vmmctl and tests).
#pragma once

#include <chrono>
#include <functional>
#include <string_view>
#include <memory>
#include <string>

#include "vmm/common/fd.h"
#include "vmm/common/result.h"
#include "vmm/common/socket_io.h"

namespace vmm::monitor {

// What the human monitor prints when it waits for a line, and what its client reads as "done".
inline constexpr const char* kHmpPrompt = "(vmm) ";

// Connects to a unix socket, retrying while it does not exist yet, until `timeout`.
Result<UniqueFd> connect_unix(const std::string& path, std::chrono::milliseconds timeout);

// Appends what arrives next to `buffer`, waiting at most 60 s; false when the peer closed.
// (send_all and readable_within: vmm/common/socket_io.h.)
Result<bool> receive_more(int fd, std::string& buffer, const std::string& peer);

class HmpClient {
public:
    static Result<std::unique_ptr<HmpClient>> connect(const std::string& path, std::chrono::milliseconds timeout);
    // Sends one line; returns what the monitor printed before its next prompt. With `stream`,
    // output is handed over as it arrives (e.g. a live progress bar) and also returned.
    Result<std::string> command(const std::string& line, const std::function<void(std::string_view)>& stream = {});

private:
    explicit HmpClient(UniqueFd fd) : fd_(std::move(fd)) {}
    Result<std::string> read_until_prompt(const std::function<void(std::string_view)>& stream = {});
    UniqueFd fd_;
    std::string buffer_;
};

}  // namespace vmm::monitor

// QmpClient: the client side of a QMP socket (ours or QEMU's): reads the greeting, negotiates
// capabilities, then sends commands and returns their answers. Asynchronous events that arrive
// in between are kept for wait_event (the newest kMaxKeptEvents). Used by vmmctl --qmp, hence
// by the benchmarks that drive our vmm and QEMU the same way, and by the tests.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "vmm/common/fd.h"
#include <nlohmann/json.hpp>
#include "vmm/common/result.h"

namespace vmm::monitor {

using Json = nlohmann::json;

class QmpClient {
public:
    // Connects to `path` (retrying while it is not there yet) within `timeout`, reads the greeting
    // within `greeting` (default: `timeout`, at least a second), then negotiates capabilities.
    static Result<std::unique_ptr<QmpClient>> connect(const std::string& path, std::chrono::milliseconds timeout,
                                                      std::optional<std::chrono::milliseconds> greeting = std::nullopt);
    // What the peer said first: {"QMP": {"version": ..., "capabilities": [...]}}.
    const Json& greeting() const { return greeting_; }
    // {"execute": name, "arguments": args}; an {"error": ...} answer becomes an Error with its desc.
    Result<Json> execute(const std::string& name, const Json& args = Json::object());
    // The same request; the whole answer, {"return": ...} or {"error": ...}, as QMP gives it.
    Result<Json> call(const std::string& name, const Json& args = Json::object());
    // Sends `line` as it is and returns the whole answer, {"return": ...} or {"error": ...}: for
    // a client that shows QMP's errors as QMP gives them, and for tests of the server's refusals.
    Result<Json> send_line(const std::string& line);
    // The oldest kept event named `name`, or the next to arrive within `timeout`; nullopt if
    // none came.
    Result<std::optional<Json>> wait_event(const std::string& name, std::chrono::milliseconds timeout);
    // The oldest kept event of any name, or the next to arrive within `timeout`.
    Result<std::optional<Json>> next_event(std::chrono::milliseconds timeout);
    // Wakes a wait under way in another thread (it ends as if the peer had closed) and ends the
    // connection: for a reader that is being stopped. The descriptor is closed with the object.
    void interrupt();

    static constexpr size_t kMaxKeptEvents = 1024;

private:
    explicit QmpClient(UniqueFd fd) : fd_(std::move(fd)) {}
    // The next JSON line within `timeout` (nullopt: none came).
    Result<std::optional<Json>> read_message(std::chrono::milliseconds timeout);
    // The next message that is not an event (events are kept), within the reply timeout.
    Result<Json> read_answer();
    void keep_event(Json event);
    // The oldest kept event whose name `wanted` accepts ("" accepts any), or the next within `timeout`.
    Result<std::optional<Json>> take_event(std::string_view wanted, std::chrono::milliseconds timeout);
    UniqueFd fd_;
    std::string buffer_;
    Json greeting_;
    std::deque<Json> events_;
};

}  // namespace vmm::monitor

// QmpClient: the client side of a QMP socket (ours or QEMU's): reads the greeting, negotiates
// capabilities, then sends commands and returns their "return" value. Asynchronous events that
// arrive in between are skipped. Used by vmmctl --qmp, hence by the benchmarks that drive our
// vmm and QEMU the same way.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "vmm/common/fd.h"
#include <nlohmann/json.hpp>
#include "vmm/common/result.h"

namespace vmm::monitor {

using Json = nlohmann::json;

class QmpClient {
public:
    static Result<std::unique_ptr<QmpClient>> connect(const std::string& path, std::chrono::milliseconds timeout);
    // {"execute": name, "arguments": args}; an {"error": ...} answer becomes an Error with its desc.
    Result<Json> execute(const std::string& name, const Json& args = Json::object());

private:
    explicit QmpClient(UniqueFd fd) : fd_(std::move(fd)) {}
    Result<Json> read_message();  // the next JSON line
    UniqueFd fd_;
    std::string buffer_;
};

}  // namespace vmm::monitor

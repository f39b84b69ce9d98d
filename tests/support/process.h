// Helpers for tests that run the real vmm binary and talk to its monitors.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "vmm/common/fd.h"
#include "vmm/monitor/client/hmp_client.h"
#include "vmm/monitor/client/qmp_client.h"

namespace vmm::test {

using Json = nlohmann::json;

// A vmm child process; killed (SIGKILL) by the destructor if still running.
class VmmProcess {
public:
    // Runs the vmm binary ($VMM_BINARY, else the build tree's) with `args`; stdout and stderr go to `log_path`.
    // A `wrapper` (e.g. {"prlimit", "--memlock=1048576"}, found in $PATH) runs it and must exec it in turn.
    static std::unique_ptr<VmmProcess> spawn(const std::vector<std::string>& args, const std::string& log_path,
                                             const std::vector<std::string>& wrapper = {});
    // Any program (`argv[0]` found in $PATH), e.g. a QEMU to test against, logged the same way.
    static std::unique_ptr<VmmProcess> spawn_program(const std::vector<std::string>& argv, const std::string& log_path);
    ~VmmProcess();
    // Exit status, or nullopt if it did not exit within `timeout`.
    std::optional<int> wait(std::chrono::milliseconds timeout);
    void signal(int signo);
    pid_t pid() const { return pid_; }

private:
    explicit VmmProcess(pid_t pid) : pid_(pid) {}
    pid_t pid_;
    bool reaped_ = false;
};

// The text-monitor client of the vmm itself; fails the test when it cannot connect.
std::unique_ptr<monitor::HmpClient> connect_hmp(const std::string& path);
// Sends one command; an I/O failure becomes the returned text, so assertions show it.
std::string hmp(monitor::HmpClient& client, const std::string& line);

// The project's own QMP client (vmm/monitor/client/qmp_client.h), with answers as QMP gives them so
// that assertions read ["return"] or ["error"]; a failure to talk at all becomes
// {"error": {"class": "ClientError", "desc": why}}, which no assertion on a real answer passes.
class QmpClient {
public:
    // Connects (retrying while the socket does not exist yet, up to 30 s), reads the greeting and
    // negotiates capabilities; nullptr if that fails.
    static std::unique_ptr<QmpClient> connect(const std::string& path);
    Json greeting() const { return client_->greeting(); }
    // Sends a request; returns its answer, keeping events that arrive meanwhile.
    Json execute(const std::string& name, const Json& args = Json::object());
    Json send_raw(const std::string& line);
    // Waits for an event named `name` (already received or arriving within `timeout`).
    std::optional<Json> wait_event(const std::string& name, std::chrono::milliseconds timeout);

private:
    explicit QmpClient(std::unique_ptr<monitor::QmpClient> c) : client_(std::move(c)) {}
    std::unique_ptr<monitor::QmpClient> client_;
};

std::string temp_path(const std::string& name);
std::string read_text_file(const std::string& path);

}  // namespace vmm::test

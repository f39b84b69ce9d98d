// MonitorServer: serves one protocol (HMP text or QMP JSON) on stdio or a unix socket, one
// thread per client session. stop() (or the destructor) wakes every session and joins it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vmm/common/fd.h"
#include "vmm/common/result.h"
#include "vmm/monitor/dispatcher.h"
#include "vmm/monitor/line_channel.h"

namespace vmm::monitor {

enum class Protocol { hmp, qmp };

class MonitorServer {
public:
    static Result<std::unique_ptr<MonitorServer>> create(Dispatcher& dispatcher, Protocol protocol);
    ~MonitorServer();
    MonitorServer(const MonitorServer&) = delete;
    MonitorServer& operator=(const MonitorServer&) = delete;

    // Replaces a stale socket file at `path`; refuses a path that is not a socket. The socket
    // gets `mode` whatever the umask (owner only by default: whoever connects drives the VM).
    Status listen_unix(const std::string& path, mode_t mode = 0600);
    Status serve_stdio();
    void stop();

private:
    MonitorServer(Dispatcher& d, Protocol p, UniqueFd stop_fd) : dispatcher_(d), protocol_(p), stop_(std::move(stop_fd)) {}
    void accept_loop();
    void start_session(int in_fd, int out_fd, UniqueFd owned);
    void run_session(LineChannel& ch);
    void hmp_session(LineChannel& ch);
    void qmp_session(LineChannel& ch);
    void reap_finished();
    std::optional<std::string> next_line(LineChannel& ch, const std::string& overlong_reply);

    struct Session {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> done;
    };

    Dispatcher& dispatcher_;
    Protocol protocol_;
    UniqueFd stop_;
    UniqueFd listen_;
    std::string path_;
    std::thread acceptor_;
    std::mutex sessions_mutex_;
    std::vector<Session> sessions_;
    bool stopped_ = false;
};

}  // namespace vmm::monitor

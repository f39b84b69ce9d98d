#include "vmm/monitor/server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"
#include "vmm/monitor/client/hmp_client.h"
#include "vmm/monitor/client/json_access.h"
#include "vmm/monitor/qmp_session.h"

namespace vmm::monitor {

namespace {
// How long the acceptor waits before trying again when the process is out of descriptors.
constexpr int kAcceptBackoffMs = 200;
// At the descriptor limit a session may end as soon as it starts (it too needs descriptors), so
// the acceptor can flap between "cannot accept" and "accepting again": the shortage is logged
// at most this often, and its end once per logged shortage.
constexpr auto kShortageLogEvery = std::chrono::seconds(60);
}  // namespace

Result<std::unique_ptr<MonitorServer>> MonitorServer::create(Dispatcher& dispatcher, Protocol protocol) {
    int fd = ::eventfd(0, EFD_CLOEXEC);
    if (fd < 0) return Error::from_errno("eventfd for the monitor");
    return std::unique_ptr<MonitorServer>(new MonitorServer(dispatcher, protocol, UniqueFd(fd)));
}

MonitorServer::~MonitorServer() { stop(); }

Status MonitorServer::listen_unix(const std::string& path, mode_t mode) {
    struct stat st{};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) return Error("monitor path " + path + " exists and is not a socket: remove it or choose another");
        ::unlink(path.c_str());
    }
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return Error::from_errno("socket for monitor " + path);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path)) return Error("monitor socket path is too long: " + path);
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) {
        return Error::from_errno("bind monitor socket " + path, errno, "check the directory exists and is writable");
    }
    // Bound but not yet listening, the socket refuses every connect; it gets its mode before
    // it listens, so whatever the umask gave it is never usable.
    if (::chmod(path.c_str(), mode) < 0) {
        Error e = Error::from_errno(fmt::format("chmod {:04o} monitor socket {}", mode, path));
        ::unlink(path.c_str());
        return e;
    }
    if (::listen(fd.get(), 8) < 0) return Error::from_errno("listen on monitor socket " + path);
    listen_ = std::move(fd);
    path_ = path;
    acceptor_ = std::thread([this] { accept_loop(); });
    return {};
}

Status MonitorServer::serve_stdio() {
    start_session(STDIN_FILENO, STDOUT_FILENO, UniqueFd());
    return {};
}

void MonitorServer::accept_loop() {
    name_this_thread("monitor");
    bool out_of_fds = false;
    bool shortage_logged = false;  // its end is still to be logged
    std::optional<std::chrono::steady_clock::time_point> last_logged;
    for (;;) {
        pollfd fds[2] = {{stop_.get(), POLLIN, 0}, {listen_.get(), POLLIN, 0}};
        // Out of descriptors, the listening socket stays readable: then wait only for a stop,
        // for a while, instead of spinning on it.
        if (::poll(fds, out_of_fds ? 1 : 2, out_of_fds ? kAcceptBackoffMs : -1) < 0) {
            if (errno == EINTR) continue;
            log::error("monitor {}: poll failed: {}", path_, std::strerror(errno));
            return;
        }
        if (fds[0].revents != 0) return;
        int c = ::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) {
            bool exhausted = errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM;
            auto now = std::chrono::steady_clock::now();
            if (exhausted && !out_of_fds && (!last_logged || now - *last_logged >= kShortageLogEvery)) {
                log::warn("monitor {}: cannot accept a client: {}; retrying every {} ms", path_, std::strerror(errno),
                          kAcceptBackoffMs);
                last_logged = now;
                shortage_logged = true;
            }
            out_of_fds = exhausted;
            if (out_of_fds) reap_finished();
            continue;  // otherwise the client went away before we accepted: nothing to do
        }
        if (out_of_fds && shortage_logged) log::info("monitor {}: accepting clients again", path_);
        if (out_of_fds) shortage_logged = false;
        out_of_fds = false;
        reap_finished();
        start_session(c, c, UniqueFd(c));
    }
}

void MonitorServer::start_session(int in_fd, int out_fd, UniqueFd owned) {
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::lock_guard lock(sessions_mutex_);
    if (stopped_) return;
    try {
        sessions_.push_back({std::thread([this, in_fd, out_fd, fd = std::move(owned), done]() mutable {
                                 name_this_thread("monitor-client");
                                 LineChannel ch(in_fd, out_fd, stop_.get(), kMaxRequestBytes);
                                 run_session(ch);
                                 fd.reset();
                                 *done = true;
                             }),
                             done});
    } catch (const std::system_error& e) {  // no thread to be had: this client is turned away
        log::warn("monitor {}: no thread for a new session ({}): the client is disconnected",
                  path_.empty() ? "stdio" : path_, e.what());
    }
}

void MonitorServer::reap_finished() {
    std::lock_guard lock(sessions_mutex_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
        if (*it->done) {
            it->thread.join();
            it = sessions_.erase(it);
        } else {
            ++it;
        }
    }
}

void MonitorServer::run_session(LineChannel& ch) {
    if (protocol_ == Protocol::hmp) hmp_session(ch);
    else qmp_session(ch);
}

// The next request line, or nullopt when the session is over. A line over the limit is
// answered with `overlong_reply` before the session closes; either is logged once here.
std::optional<std::string> MonitorServer::next_line(LineChannel& ch, const std::string& overlong_reply) {
    auto line = ch.read_line();
    if (line) return *line ? std::optional<std::string>(std::move(**line)) : std::nullopt;
    if (ch.overlong()) (void)ch.write(overlong_reply);
    log::warn("monitor {}: closing a {} session: {}", path_.empty() ? "stdio" : path_,
              protocol_ == Protocol::hmp ? "text" : "QMP", line.error().message());
    return std::nullopt;
}

void MonitorServer::hmp_session(LineChannel& ch) {
    if (!ch.write(std::string("vmm monitor - type 'help' for more information\n") + kHmpPrompt)) return;
    std::string overlong = fmt::format("Error: request line longer than {} bytes: the session is closed\n", ch.max_line());
    while (auto line = next_line(ch, overlong)) {
        HmpOutcome out;
        if (line->find_first_not_of(" \t") != std::string::npos) out = dispatcher_.run_hmp(*line);
        if (!out.text.empty() && !ch.write(out.text)) return;
        if (out.follow) out.follow([&ch](const std::string& text) { return bool(ch.write(text)); });
        if (!ch.write(kHmpPrompt)) return;
    }
}

void MonitorServer::qmp_session(LineChannel& ch) {
    QmpSession session(dispatcher_, [&ch](const std::string& event) { (void)ch.write(event); });
    if (!ch.write(QmpSession::greeting())) return;
    while (auto line = next_line(ch, QmpSession::too_long(ch.max_line()))) {
        std::string reply = session.handle(*line);
        if (!reply.empty() && !ch.write(reply)) return;
    }
}

void MonitorServer::stop() {
    {
        std::lock_guard lock(sessions_mutex_);
        if (stopped_) return;
        stopped_ = true;
    }
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(stop_.get(), &one, sizeof(one));
    if (acceptor_.joinable()) acceptor_.join();
    std::vector<Session> sessions;
    {
        std::lock_guard lock(sessions_mutex_);
        sessions.swap(sessions_);
    }
    for (auto& s : sessions) s.thread.join();
    if (!path_.empty()) ::unlink(path_.c_str());
}

}  // namespace vmm::monitor

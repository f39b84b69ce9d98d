#include "vmm/monitor/server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"

namespace vmm::monitor {

namespace {
constexpr const char* kPrompt = "(vmm) ";

Json qmp_greeting() {
    return Json{{"QMP", {{"version", {{"qemu", {{"major", 0}, {"minor", 1}, {"micro", 0}}}, {"package", "vmm"}}},
                         {"capabilities", Json::array()}}}};
}
}  // namespace

Result<std::unique_ptr<MonitorServer>> MonitorServer::create(Dispatcher& dispatcher, Protocol protocol) {
    int fd = ::eventfd(0, EFD_CLOEXEC);
    if (fd < 0) return Error::from_errno("eventfd for the monitor");
    return std::unique_ptr<MonitorServer>(new MonitorServer(dispatcher, protocol, UniqueFd(fd)));
}

MonitorServer::~MonitorServer() { stop(); }

Status MonitorServer::listen_unix(const std::string& path) {
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
    for (;;) {
        pollfd fds[2] = {{listen_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            log::error("monitor {}: poll failed: {}", path_, std::strerror(errno));
            return;
        }
        if (fds[1].revents != 0) return;
        int c = ::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;  // the client went away before we accepted: nothing to do
        reap_finished();
        start_session(c, c, UniqueFd(c));
    }
}

void MonitorServer::start_session(int in_fd, int out_fd, UniqueFd owned) {
    auto done = std::make_shared<bool>(false);
    std::lock_guard lock(sessions_mutex_);
    if (stopped_) return;
    sessions_.push_back({std::thread([this, in_fd, out_fd, fd = std::move(owned), done]() mutable {
                             name_this_thread("monitor-client");
                             LineChannel ch(in_fd, out_fd, stop_.get());
                             run_session(ch);
                             fd.reset();
                             *done = true;
                         }),
                         done});
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

void MonitorServer::hmp_session(LineChannel& ch) {
    if (!ch.write(std::string("vmm monitor - type 'help' for more information\n") + kPrompt)) return;
    for (;;) {
        auto line = ch.read_line();
        if (!line || !*line) return;
        HmpOutcome out;
        if ((*line)->find_first_not_of(" \t") != std::string::npos) out = dispatcher_.run_hmp(**line);
        if (!out.text.empty() && !ch.write(out.text)) return;
        if (out.follow) out.follow([&ch](const std::string& text) { return bool(ch.write(text)); });
        if (!ch.write(kPrompt)) return;
    }
}

void MonitorServer::qmp_session(LineChannel& ch) {
    if (!ch.write(qmp_greeting().dump() + "\n")) return;
    int sub = 0;
    for (;;) {
        auto line = ch.read_line();
        if (!line || !*line) break;
        if ((*line)->find_first_not_of(" \t") == std::string::npos) continue;
        Json req = Json::parse(**line, nullptr, false);
        Json reply;
        bool negotiation = req.is_object() && req.value("execute", "") == "qmp_capabilities";
        if (req.is_discarded()) {
            reply = qmp_error("JSON parse error");
        } else if (negotiation) {
            reply = sub ? qmp_error("Capabilities negotiation is already complete, command ignored", "CommandNotFound")
                        : Json{{"return", Json::object()}};
            if (!sub) sub = dispatcher_.subscribe([&ch](const Json& ev) { (void)ch.write(ev.dump() + "\n"); });
        } else if (!sub) {
            reply = qmp_error("Expecting capabilities negotiation with 'qmp_capabilities'", "CommandNotFound");
        } else {
            reply = dispatcher_.run_qmp(req);
        }
        if (req.is_object() && req.contains("id")) reply["id"] = req["id"];
        if (!ch.write(reply.dump() + "\n")) break;
    }
    if (sub) dispatcher_.unsubscribe(sub);
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

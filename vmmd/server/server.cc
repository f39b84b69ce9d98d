#include "vmmd/server/server.h"

#include <fmt/format.h>
#include <libvirt/virterror.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "vmm/common/log.h"
#include "vmm/common/socket_io.h"
#include "vmm/common/thread_name.h"
#include "vmmd/server/call_workers.h"
#include "vmmd/domain/atomic_file.h"
#include "vmmd/migration/migration_uri.h"

namespace vmmd {

using vmm::Error;

namespace {

constexpr long kSendTimeoutSeconds = 30;
constexpr auto kFrameDeadline = std::chrono::seconds(10);     // a begun message arrives whole within it
constexpr auto kRefusalLogInterval = std::chrono::seconds(10);
constexpr size_t kCallsInFlight = 5;                           // per connection, as libvirtd's max_client_requests
constexpr int32_t kConnectOpen = rpc::number_of(rpc::Proc::CONNECT_OPEN);
constexpr int32_t kConnectClose = rpc::number_of(rpc::Proc::CONNECT_CLOSE);

Result<sockaddr_un> unix_address(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path) return Error(fmt::format("socket path '{}' is too long for a unix socket", path));
    path.copy(a.sun_path, path.size());
    return a;
}

// A socket file left by a vmmd that is gone is replaced; one that still answers is not ours.
Status clear_stale(const std::string& path, const sockaddr_un& a) {
    if (!std::filesystem::exists(path)) return {};
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (probe.valid() && ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) {
        return Error(fmt::format("{} is served by another process (another vmmd?): stop it or use --socket", path));
    }
    if (::unlink(path.c_str()) != 0) return Error::from_errno("remove the stale socket " + path);
    return {};
}

struct AddrInfoFree {
    void operator()(addrinfo* a) const { ::freeaddrinfo(a); }
};

// HOST:PORT or [V6ADDR]:PORT, bound and listening (SO_REUSEADDR: a restarted vmmd rebinds at once).
Result<UniqueFd> bind_tcp(const std::string& where) {
    auto hp = parse_host_port(where, fmt::format("TCP listen address '{}'", where));
    if (!hp) return hp.error();
    if (hp->port == 0) return Error(fmt::format("TCP listen address '{}' has no port: HOST:PORT", where));
    std::string port = std::to_string(hp->port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    if (int rc = ::getaddrinfo(hp->host.c_str(), port.c_str(), &hints, &res); rc != 0)
        return Error(fmt::format("TCP listen address '{}': {}", where, ::gai_strerror(rc)));
    std::unique_ptr<addrinfo, AddrInfoFree> list(res);
    Error last(fmt::format("TCP listen address '{}' resolves to nothing", where));
    for (addrinfo* a = list.get(); a != nullptr; a = a->ai_next) {
        UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
        int one = 1;
        if (!fd.valid() || ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
            ::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 16) != 0) {
            int err = errno;
            last = Error::from_errno("listen on TCP " + where, err,
                                     err == EADDRINUSE ? "another process holds that port (ss -ltnp shows which): stop it or "
                                                         "choose another port for this listener"
                                                       : "");
            continue;
        }
        return fd;
    }
    return last;
}

Result<UniqueFd> bind_socket(const SocketSpec& s) {
    if (s.tcp) return bind_tcp(s.path);
    auto a = unix_address(s.path);
    if (!a) return a.error();
    // 0755, as libvirtd's /run/libvirt: the read-only socket in it is for every user.
    std::string parent = std::filesystem::path(s.path).parent_path().string();
    if (!parent.empty()) {
        if (auto made = make_directories(parent, 0755); !made) return made.error().context("the directory of " + s.path);
    }
    if (auto st = clear_stale(s.path, *a); !st) return st.error();
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) return Error::from_errno("socket(AF_UNIX)");
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*a), sizeof *a) != 0) return Error::from_errno("bind " + s.path);
    if (::chmod(s.path.c_str(), s.mode) != 0) return Error::from_errno("chmod " + s.path);
    if (::listen(fd.get(), 16) != 0) return Error::from_errno("listen on " + s.path);
    return fd;
}

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// Reads exactly `n` bytes. false: the peer closed before the first byte (a clean end between
// messages); a close in the middle, a stop, an I/O error or `deadline` passing is an Error.
// Without a deadline the first byte may take for ever; `started` is set when it came.
Result<bool> read_exact(int fd, int stop_fd, uint8_t* p, size_t n, Deadline deadline,
                        std::chrono::steady_clock::time_point* started = nullptr) {
    size_t got = 0;
    while (got < n) {
        pollfd fds[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
        int wait = -1;
        if (deadline) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) {
                return Error(fmt::format("the client sent {} of {} bytes and no more within {} s: it is closed", got, n,
                                         kFrameDeadline.count()));
            }
            wait = static_cast<int>(left.count());
        }
        int ready = ::poll(fds, 2, wait);
        if (ready < 0) {
            if (errno == EINTR) continue;
            return Error::from_errno("poll on a client");
        }
        if (ready == 0) continue;  // the deadline is checked above
        if (fds[1].revents != 0) return Error("vmmd is stopping");
        ssize_t r = ::read(fd, p + got, n - got);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r < 0) return Error::from_errno("read from a client");
        if (r == 0) {
            if (got == 0) return false;
            return Error(fmt::format("the client closed in the middle of a message ({} of {} bytes)", got, n));
        }
        if (got == 0 && !deadline) {  // begun: the rest comes soon
            auto now = std::chrono::steady_clock::now();
            deadline = now + kFrameDeadline;
            if (started) *started = now;
        }
        got += static_cast<size_t>(r);
    }
    return true;
}

// Whether the client sends something (or hangs up) within `quiet`: false when it stays silent.
Result<bool> await_message(int fd, int stop_fd, std::chrono::seconds quiet) {
    auto until = std::chrono::steady_clock::now() + quiet;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd fds[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
        int ready = ::poll(fds, 2, static_cast<int>(left.count()));
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) return Error::from_errno("poll on a client");
        if (ready > 0 && fds[1].revents != 0) return Error("vmmd is stopping");
        if (ready > 0) return true;
    }
}

// The next whole message, or nullopt when the client hung up between messages.
Result<std::optional<rpc::Message>> read_message(int fd, int stop_fd) {
    uint8_t word[rpc::kLengthSize];
    std::chrono::steady_clock::time_point started;
    auto got = read_exact(fd, stop_fd, word, sizeof word, std::nullopt, &started);
    if (!got) return got.error();
    if (!*got) return std::optional<rpc::Message>();
    auto n = rpc::decode_length(word);
    if (!n) return n.error();
    std::vector<uint8_t> body(*n);
    auto rest = read_exact(fd, stop_fd, body.data(), body.size(), started + kFrameDeadline);
    if (!rest) return rest.error();
    if (!*rest) return Error("the client closed after a length word");
    auto m = rpc::decode_message(body);
    if (!m) return m.error();
    return std::optional<rpc::Message>(std::move(*m));
}

// The answer to one message, or nothing (a keepalive PONG, a stray reply).
std::optional<std::vector<uint8_t>> answer(const rpc::Dispatcher& d, rpc::Caller& caller, const rpc::Message& m) {
    const rpc::Header& h = m.header;
    if (h.program == rpc::kKeepaliveProgram) {
        if (h.procedure != rpc::kKeepalivePing) return std::nullopt;
        rpc::Header pong{rpc::kKeepaliveProgram, rpc::kKeepaliveVersion, rpc::kKeepalivePong, rpc::Type::message, 0,
                         rpc::ReplyStatus::ok};
        return rpc::encode_message(pong, {});
    }
    auto refuse = [&h](std::string why) {
        rpc::Header reply = h;
        reply.type = rpc::Type::reply;
        reply.status = rpc::ReplyStatus::error;
        rpc::RemoteError e;
        e.code = VIR_ERR_RPC;
        e.domain = rpc::error_domain(VIR_ERR_RPC);
        e.message = std::move(why);
        return rpc::encode_message(reply, rpc::encode_error(e));
    };
    // A call with descriptors: answered, so that the client does not wait for ever.
    if (h.type == rpc::Type::call_with_fds) return refuse("vmmd takes no file descriptors over its socket");
    if (h.type != rpc::Type::call) return std::nullopt;  // replies, events and streams are not answered
    if (!d.serves(h.program)) {
        return refuse(fmt::format("vmmd serves libvirt's remote and QEMU programs, not program {:#x}", h.program));
    }
    return d.call(caller, m);
}

}  // namespace

void Server::remove_socket_files(const std::vector<Listener>& ls) {
    for (const Listener& l : ls)
        if (!l.spec.tcp) ::unlink(l.spec.path.c_str());
}

Result<std::unique_ptr<Server>> Server::listen(const std::vector<SocketSpec>& sockets, const rpc::Dispatcher& d,
                                               ConnectionHooks hooks) {
    std::vector<Listener> ls;
    for (const SocketSpec& s : sockets) {
        auto fd = bind_socket(s);
        if (!fd) {
            remove_socket_files(ls);  // none is left behind that nobody serves ("connection refused")
            return fd.error();
        }
        ls.push_back({s, std::move(*fd), {}, {}});
    }
    UniqueFd stop(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!stop.valid()) return Error::from_errno("eventfd");
    return std::unique_ptr<Server>(new Server(std::move(ls), std::move(stop), d, std::move(hooks)));
}

Server::Server(std::vector<Listener> listeners, UniqueFd stop, const rpc::Dispatcher& d, ConnectionHooks hooks)
    : listeners_(std::move(listeners)), stop_(std::move(stop)), dispatcher_(d), hooks_(std::move(hooks)) {}

Server::~Server() {
    join_clients();
    remove_socket_files(listeners_);
}

void Server::join_clients() {
    stop();
    std::lock_guard lock(mutex_);
    for (auto& t : terminators_) t->stop();
    for (Client& c : clients_)
        if (c.thread.joinable()) c.thread.join();
    terminators_.clear();  // joins their threads
}

void Server::stop() {
    uint64_t one = 1;
    (void)::write(stop_.get(), &one, sizeof one);
}

Status Server::run() {
    for (;;) {
        std::vector<pollfd> fds{{stop_.get(), POLLIN, 0}};
        for (const Listener& l : listeners_) fds.push_back({l.fd.get(), POLLIN, 0});
        if (::poll(fds.data(), fds.size(), 1000) < 0) {
            if (errno == EINTR) continue;
            return Error::from_errno("poll on the vmmd sockets");
        }
        if (fds[0].revents != 0) return {};
        for (size_t i = 0; i < listeners_.size(); ++i)
            if (fds[i + 1].revents != 0) accept_one(listeners_[i]);
        reap_finished();
    }
}

bool Server::full(Listener& l, std::optional<uid_t> uid) {
    size_t n = 0, theirs = 0;
    for (const Client& c : clients_) {
        if (c.listener != &l || c.done) continue;
        ++n;
        theirs += uid && c.uid == uid ? 1 : 0;
    }
    auto now = std::chrono::steady_clock::now();
    if (uid && l.spec.max_per_user != 0 && theirs >= l.spec.max_per_user) {
        if (auto& last = l.user_refusals[*uid]; now - last >= kRefusalLogInterval) {
            last = now;
            vmm::log::warn("vmmd: {} serves {} clients of user {}, the most one user may have: more of theirs are closed "
                           "at once (--max-readonly-clients-per-user)",
                           l.spec.path, theirs, *uid);
        }
        return true;
    }
    if (n < l.spec.max_clients) return false;
    if (now - l.last_refusal >= kRefusalLogInterval) {
        l.last_refusal = now;
        vmm::log::warn("vmmd: {} serves {} clients, its most: more are closed at once (--max-clients, "
                       "--max-readonly-clients)",
                       l.spec.path, n);
    }
    return true;
}

void Server::accept_one(Listener& l) {
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    UniqueFd fd(::accept4(l.fd.get(), reinterpret_cast<sockaddr*>(&from), &from_len, SOCK_CLOEXEC));
    if (!fd.valid()) {
        if (errno != EAGAIN && errno != EINTR) vmm::log::warn("accept on {}: {}", l.spec.path, std::strerror(errno));
        return;
    }
    std::optional<uid_t> uid;
    if (!l.spec.tcp) {
        ucred peer{};
        socklen_t len = sizeof peer;
        if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0) uid = peer.uid;
    }
    std::lock_guard lock(mutex_);
    if (full(l, uid)) return;  // the descriptor closes: the client hears at once
    if (!l.spec.tls) {
        add_client(std::move(fd), l, !l.spec.tcp, uid);
        return;
    }
    // TLS: the terminator's thread authenticates the client; the server serves its plain end.
    char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
    ::getnameinfo(reinterpret_cast<sockaddr*>(&from), from_len, host, sizeof host, port, sizeof port,
                  NI_NUMERICHOST | NI_NUMERICSERV);
    UniqueFd plain;
    auto t = TlsTerminator::start(std::move(fd), *l.spec.tls, fmt::format("{}:{}", host, port), &plain);
    if (!t) {
        vmm::log::warn("vmmd: a TLS client on {}: {}", l.spec.path, t.error().message());
        return;
    }
    terminators_.push_back(std::move(*t));
    add_client(std::move(plain), l, true);
}

void Server::add_client(UniqueFd fd, const Listener& l, bool secure, std::optional<uid_t> uid) {
    // A client that stops reading its replies must not hold its thread for ever.
    timeval send_timeout{kSendTimeoutSeconds, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
    Client& c = clients_.emplace_back();
    c.outbox = std::make_shared<Outbox>(fd.get());
    c.fd = std::move(fd);
    c.number = next_connection_++;
    c.read_only = l.spec.read_only;
    c.secure = secure;
    c.uid = uid;
    c.listener = &l;
    if (hooks_.opened) hooks_.opened(c.number, c.outbox);
    c.thread = std::thread([this, &c] {
        vmm::name_this_thread("vmmd-client");
        serve(c);
        if (hooks_.closed) hooks_.closed(c.number);
        c.outbox->close();  // before the descriptor closes: no event is written to a reused one
        c.done = true;
    });
}

void Server::reap_finished() {
    std::lock_guard lock(mutex_);
    terminators_.remove_if([](const std::unique_ptr<TlsTerminator>& t) { return t->done(); });
    for (auto it = clients_.begin(); it != clients_.end();) {
        if (!it->done) {
            ++it;
            continue;
        }
        if (it->thread.joinable()) it->thread.join();
        it = clients_.erase(it);
    }
}

void Server::serve(Client& c) {
    rpc::Caller caller;
    caller.read_only = c.read_only;
    caller.connection = c.number;
    caller.secure = c.secure;
    CallWorkers workers(kCallsInFlight);  // declared after caller: joined before it goes
    const SocketSpec& spec = c.listener->spec;
    for (;;) {
        // Before CONNECT_OPEN a client has open_within; after it, idle_limit between messages.
        auto quiet = caller.opened ? spec.idle_limit : spec.open_within;
        if (quiet.count() != 0) {
            auto came = await_message(c.fd.get(), stop_.get(), quiet);
            if (!came) return;  // vmmd stops
            if (!*came) {
                vmm::log::info("vmmd: a client of {} {} for {} s: closed", spec.path,
                               caller.opened ? "sent nothing" : "did not open its connection", quiet.count());
                return;
            }
        }
        auto m = read_message(c.fd.get(), stop_.get());
        if (!m) {
            vmm::log::warn("vmmd: a client's connection closed: {}", m.error().message());
            return;
        }
        if (!*m) return;  // hung up
        const rpc::Header& h = (*m)->header;
        bool remote = h.program == rpc::kRemoteProgram;
        if (dispatcher_.serves(h.program) && h.type == rpc::Type::call && caller.opened &&
            !(remote && (h.procedure == kConnectOpen || h.procedure == kConnectClose))) {
            // A call on an open connection runs beside the reader, with the caller as it is now
            // (only CONNECT_OPEN and CONNECT_CLOSE change it, and they run here).
            workers.run([this, &c, snapshot = caller, message = std::move(**m)]() mutable {
                if (auto reply = answer(dispatcher_, snapshot, message)) (void)c.outbox->send(*reply);
            });
            continue;
        }
        if (remote && h.procedure == kConnectClose) workers.wait_all();  // its reply is the last
        auto reply = answer(dispatcher_, caller, **m);
        if (reply && !c.outbox->send(*reply)) return;
        if (caller.closed) return;  // CONNECT_CLOSE was answered
    }
}

}  // namespace vmmd

// Server: libvirt's RPC on unix sockets, and on TCP when asked (for --p2p between hosts). One
// thread per client reads whole messages (the length word first, checked before the body is
// read) and answers the keepalive program's PING with PONG at once; the calls of an open
// connection run beside it, up to five at a time (CallWorkers), so a long call never silences
// the connection. A message that cannot be framed or decoded closes that client's connection,
// saying why in the log; the daemon and every other client run on. A client may wait as long as
// it likes between messages once it has opened its connection (on the read-only socket, at most
// its idle limit), but it must open it within open_within, a message it has begun must arrive
// whole within 10 s, and each socket serves at most its max_clients at once, and at most
// max_per_user of one local user's: no client can hold a thread for ever, nor starve another
// socket's or another user's.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "vmm/common/fd.h"
#include "vmmd/server/outbox.h"
#include "vmmd/server/tls_terminator.h"
#include "vmmd/rpc/dispatch.h"

namespace vmmd {

using vmm::Result;
using vmm::Status;
using vmm::UniqueFd;

struct SocketSpec {
    std::string path;        // a unix socket's path; with `tcp`, HOST:PORT ([V6ADDR]:PORT)
    bool read_only = false;  // connections on it may query, never change anything
    mode_t mode = 0600;      // unix sockets only
    // A TCP listener. Without `tls` it has no authentication (libvirtd's auth_tcp = "none"):
    // whoever reaches the address may manage domains, so bind it to a trusted network only.
    bool tcp = false;
    // A TLS listener (--listen-tls): every client proves itself with a certificate
    // (tls_terminator.h) and its connection is secure (CONNECT_IS_SECURE).
    std::optional<TlsServerConfig> tls;
    // At most this many clients at once on this socket (libvirtd's max_clients, per socket here:
    // the read-only socket, open to every user, cannot use up the read-write one's); one more is
    // accepted and closed at once, with a line in the log (at most one every 10 s).
    size_t max_clients = 256;
    // Unix sockets: at most this many of one user's clients at once (its peer's uid; 0: no limit).
    size_t max_per_user = 0;
    // A client that has not opened its connection (CONNECT_OPEN) this long after it came is
    // closed; one that has, and then sends nothing (no call, no keepalive) for idle_limit, too
    // (0 s: no limit).
    std::chrono::seconds open_within{10};
    std::chrono::seconds idle_limit{0};
};

// Who hears of connections coming and going (the event hub: events go to a connection's outbox).
struct ConnectionHooks {
    std::function<void(uint64_t connection, std::shared_ptr<Outbox> outbox)> opened;
    std::function<void(uint64_t connection)> closed;
};

class Server {
public:
    // Binds and listens on every socket (a stale socket file is replaced; a live one, served by
    // another vmmd, is an error).
    static Result<std::unique_ptr<Server>> listen(const std::vector<SocketSpec>& sockets, const rpc::Dispatcher& d,
                                                  ConnectionHooks hooks = {});
    ~Server();  // stops accepting, closes every client and joins its thread, removes the sockets
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Accepts and serves clients until stop().
    Status run();
    void stop();  // from any thread (a signal handler's watcher)
    // Stops, and joins every client's thread (and the calls it runs): after it nothing calls the
    // dispatcher or the hooks, so what they use may go. The destructor does it too.
    void join_clients();

private:
    struct Listener {
        SocketSpec spec;
        UniqueFd fd;
        std::chrono::steady_clock::time_point last_refusal{};  // under mutex_: when the log last said so
        std::map<uid_t, std::chrono::steady_clock::time_point> user_refusals;  // likewise, per user
    };
    // Unlinks the unix sockets' files (a vmmd that stops, or fails to start, leaves none).
    static void remove_socket_files(const std::vector<Listener>& ls);
    struct Client {
        UniqueFd fd;
        uint64_t number = 0;
        std::shared_ptr<Outbox> outbox;
        bool read_only = false;
        bool secure = true;
        std::optional<uid_t> uid;  // a unix socket's peer
        const Listener* listener = nullptr;
        std::thread thread;
        std::atomic<bool> done{false};
    };
    Server(std::vector<Listener> listeners, UniqueFd stop, const rpc::Dispatcher& d, ConnectionHooks hooks);
    void accept_one(Listener& l);
    // Under mutex_: `l` has its max_clients, or `uid`'s max_per_user (said in the log).
    bool full(Listener& l, std::optional<uid_t> uid);
    void add_client(UniqueFd fd, const Listener& l, bool secure, std::optional<uid_t> uid = std::nullopt);  // under mutex_
    void serve(Client& c);
    void reap_finished();

    std::vector<Listener> listeners_;
    UniqueFd stop_;  // eventfd: readable once stop() was called
    const rpc::Dispatcher& dispatcher_;
    ConnectionHooks hooks_;
    std::mutex mutex_;
    uint64_t next_connection_ = 1;
    std::list<Client> clients_;
    std::list<std::unique_ptr<TlsTerminator>> terminators_;  // under mutex_: one per TLS client
};

}  // namespace vmmd

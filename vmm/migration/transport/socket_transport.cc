#include "vmm/migration/transport/socket_transport.h"

#include <fcntl.h>

#include <algorithm>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "vmm/common/log.h"
#include "vmm/migration/transport/candidates.h"
#include "vmm/migration/transport/multifd.h"
#include "vmm/migration/wire/multifd_wire.h"
#include "vmm/migration/wire/stream_format.h"
#include "vmm/stream/socket_stream.h"
#include "vmm/stream/tls_stream.h"

namespace vmm::migration {

namespace {

// What kind of a source's connection this is, by its first 8 bytes (put back for the reader): a
// main one begins with vmm's stream magic or a multifd preface, a side one with a lane's or
// postcopy-preempt's hello (multifd_handshake.cc judges them further). Anything else, or nothing
// within `within`, is not a migration, said in one line.
Result<Candidates::Kind> first_words_of_a_source(stream::ByteStream& s, std::chrono::milliseconds within) {
    if (auto r = s.await_readable(within); !r) return r.error().context("it said nothing");
    std::array<uint8_t, 8> first{};
    if (auto r = s.read_exact(first); !r) return r.error().context("it closed before saying 8 bytes");
    if (auto r = s.unread(first); !r) return r.error();
    if (first == kLaneMagic || first == kPreemptMagic) return Candidates::Kind::side;
    if (starts_with_preface(first)) return Candidates::Kind::main;
    if (auto r = decode_magic(first); !r) return r.error();
    return Candidates::Kind::main;
}

constexpr int kBacklog = 2 + static_cast<int>(kMaxLanes);  // the main connection, its lanes, the preempt one

using OpenFd = std::function<Result<UniqueFd>()>;  // another connection to the same peer

class SocketConnection final : public Connection {
public:
    SocketConnection(std::unique_ptr<stream::ByteStream> stream, std::string peer)
        : stream_(std::move(stream)), peer_(std::move(peer)) {}
    stream::ByteStream& stream() override { return *stream_; }
    SourceRamChannel* source_ram() override { return source_lanes_.get(); }
    DestRamChannel* dest_ram() override { return dest_lanes_.get(); }
    std::string describe() const override { return peer_; }
    void describe_as(std::string what) { peer_ = std::move(what); }  // the stream keeps its own name
    stream::ByteStream* preempt_stream() override { return preempt_.get(); }
    // Multifd's lanes carry the precopy rounds; after the switch they rest and postcopy goes on
    // the main stream and the preempt connection, as without them.
    bool carries_postcopy() override { return true; }
    Status cut() override {
        if (preempt_) (void)preempt_->shutdown();
        if (source_lanes_) source_lanes_->cut();
        if (dest_lanes_) dest_lanes_->cut();
        return stream_->shutdown();
    }

    std::unique_ptr<SourceRamChannel> source_lanes_;
    std::unique_ptr<DestRamChannel> dest_lanes_;
    std::unique_ptr<stream::ByteStream> preempt_;  // postcopy-preempt's, or none

private:
    std::unique_ptr<stream::ByteStream> stream_;
    std::string peer_;
};

// Records go out as soon as they are written (harmless failure on unix sockets).
void set_nodelay(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Status wait_fd(int fd, short events, const stream::CancelToken& cancel, int timeout_ms, const std::string& what) {
    pollfd fds[2] = {{fd, events, 0}, {cancel.fd(), POLLIN, 0}};
    for (;;) {
        int r = ::poll(fds, 2, timeout_ms);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return Error::from_errno("poll " + what);
        if (fds[1].revents != 0) return Error("migration cancelled");
        if (r == 0) return Error::with_errno(fmt::format("{}: no answer within {} ms (x-connect-timeout)", what, timeout_ms), ETIMEDOUT);
        return {};
    }
}

Result<UniqueFd> connect_addr(const sockaddr* addr, socklen_t len, int family, const TransportContext& ctx,
                              const std::string& what) {
    UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) return Error::from_errno("socket for " + what);
    if (::connect(fd.get(), addr, len) < 0) {
        if (errno != EINPROGRESS) return Error::from_errno("connect to " + what, errno, "is the destination listening (--incoming)?");
        auto s = wait_fd(fd.get(), POLLOUT, *ctx.cancel, static_cast<int>(ctx.options().params.connect_timeout_ms),
                         "connect to " + what);
        if (!s) return s.error();
        int err = 0;
        socklen_t elen = sizeof(err);
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &elen);
        if (err != 0) return Error::from_errno("connect to " + what, err, "is the destination listening (--incoming)?");
    }
    return fd;
}

// One connection's stream: the socket's, inside a TLS session when tls-creds is set (the source
// is the client, the destination the server; tls_stream.h).
Result<std::unique_ptr<stream::ByteStream>> connection_stream(UniqueFd fd, const TransportContext& ctx, std::string peer,
                                                      stream::TlsRole role) {
    std::string peer_for_log = peer;
    auto plain = make_socket_stream(std::move(fd), ctx, std::move(peer));
    Options options = ctx.options();
    const Parameters& p = options.params;
    if (!tls_wanted(p)) return plain;
    stream::MigrationTls settings{.creds = p.tls_creds,
                                  .hostname = p.tls_hostname,
                                  .uri_host = ctx.uri.host,
                                  .authz = p.tls_authz,
                                  .connect_timeout = std::chrono::milliseconds(p.connect_timeout_ms),
                                  .rekey_records = p.tls_rekey_records,
                                  .kernel_send = options.caps.tls_kernel};
    auto tls = stream::tls_handshake(std::move(plain), stream::migration_tls_setup(role, settings));
    if (tls && stream::tls_kernel_sends(**tls)) log::info("{}: what this side sends is encrypted by the kernel's TLS (x-tls-kernel)", peer_for_log);
    return tls;
}

// The source's connection: the main stream, then the multifd lanes and the postcopy-preempt
// connection when those capabilities are on.
Result<std::unique_ptr<Connection>> source_connection(UniqueFd fd, const TransportContext& ctx, const OpenFd& again) {
    std::string peer = "destination " + ctx.uri.text;
    auto stream = connection_stream(std::move(fd), ctx, peer, stream::TlsRole::client);
    if (!stream) return stream.error().context("connecting to " + ctx.uri.text);
    if (tls_wanted(ctx.options().params)) peer += " over TLS 1.3";
    auto conn = std::make_unique<SocketConnection>(std::move(*stream), peer);
    Options options = ctx.options();
    const Capabilities& caps = options.caps;
    bool preempt = caps.postcopy_ram && caps.postcopy_preempt;
    if (!caps.multifd && !preempt) return std::unique_ptr<Connection>(std::move(conn));
    uint32_t lanes = caps.multifd ? static_cast<uint32_t>(options.params.multifd_channels) : 0;
    OpenStream open = [&](std::string name) -> Result<std::unique_ptr<stream::ByteStream>> {
        auto side_fd = again();
        if (!side_fd) return side_fd.error();
        return connection_stream(std::move(*side_fd), ctx, fmt::format("destination {} ({})", ctx.uri.text, name),
                                 stream::TlsRole::client);
    };
    auto side = open_side_connections(conn->stream(), lanes, preempt, open);
    if (!side) return side.error();
    if (!side->lanes.empty()) conn->source_lanes_ = make_source_lanes(std::move(side->lanes), ctx.blocks, caps.verify_ram);
    conn->preempt_ = std::move(side->preempt);
    return std::unique_ptr<Connection>(std::move(conn));
}

class SocketListener final : public Listener {
public:
    SocketListener(UniqueFd fd, TransportContext ctx, std::string what, std::string unlink_path = {})
        : fd_(std::move(fd)), ctx_(std::move(ctx)), what_(std::move(what)), unlink_(std::move(unlink_path)) {}
    ~SocketListener() override {
        if (!unlink_.empty()) ::unlink(unlink_.c_str());
    }
    // The source's connections, checked side by side (candidates.h): the TLS handshake, then the
    // first words, each within x-connect-timeout of its accept. One that closes, stays silent,
    // fails TLS or begins with anything else (a port scan, a load balancer's health check, an
    // HTTP request, QEMU's stream) is dropped with a warning, and the listener goes on waiting:
    // a stray connection neither ends the migration it waits for nor holds up its source.
    Result<std::unique_ptr<Connection>> accept() override { return accept_within(-1); }
    Result<std::unique_ptr<Connection>> accept_until(std::chrono::steady_clock::time_point deadline) override {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        return accept_within(static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT32_MAX)));
    }
    std::string describe() const override { return what_; }

private:
    // The source's connection, waiting at most `main_ms` for it (-1: as long as it takes).
    Result<std::unique_ptr<Connection>> accept_within(int main_ms) {
        // The settings as they are when each connection comes (a person may change them on a
        // destination while it waits).
        auto within = [this] { return std::chrono::milliseconds(ctx_.options().params.connect_timeout_ms); };
        auto peer = [this] { return tls_wanted(ctx_.options().params) ? "the migration source over TLS 1.3" : "the migration source"; };
        Candidates candidates(
            [this, peer, within](UniqueFd fd) -> Result<Candidates::Checked> {
                auto stream = connection_stream(std::move(fd), ctx_, peer(), stream::TlsRole::server);
                if (!stream) return stream.error().context("its TLS handshake failed");
                auto kind = first_words_of_a_source(**stream, within());
                if (!kind) return kind.error();
                return Candidates::Checked{std::move(*stream), *kind};
            },
            what_, within);
        auto main = next_checked(candidates, Candidates::Kind::main, main_ms);
        if (!main) return main.error();
        auto conn = std::make_unique<SocketConnection>(std::move(*main), peer());
        int timeout = static_cast<int>(within().count());
        OpenStream next = [&](std::string name) -> Result<std::unique_ptr<stream::ByteStream>> {
            auto side = next_checked(candidates, Candidates::Kind::side, timeout);
            if (side) (*side)->set_peer(std::move(name));
            return side;
        };
        auto side = accept_side_connections(conn->stream(), next);
        if (!side) return side.error();
        conn->preempt_ = std::move(side->preempt);
        if (side->lanes.empty()) return std::unique_ptr<Connection>(std::move(conn));
        conn->describe_as(fmt::format("{}, RAM over {} multifd lanes", peer(), side->lanes.size()));
        conn->dest_lanes_ = make_dest_lanes(std::move(side->lanes), ctx_.blocks);
        return std::unique_ptr<Connection>(std::move(conn));
    }

    // The next stream of `kind` that checks out, accepting connections into `candidates` while
    // none has, for at most `timeout_ms` (-1: as long as it takes).
    Result<std::unique_ptr<stream::ByteStream>> next_checked(Candidates& candidates, Candidates::Kind kind, int timeout_ms) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        for (;;) {
            if (auto checked = candidates.take(kind)) return checked;
            auto wait = candidates.next_deadline();
            if (timeout_ms >= 0) {
                auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
                if (left.count() <= 0) {
                    return Error::with_errno(fmt::format("accept on {}: no answer within {} ms (x-connect-timeout)", what_, timeout_ms),
                                             ETIMEDOUT);
                }
                wait = std::min(wait, left);
            }
            int poll_ms = wait == std::chrono::milliseconds::max() ? -1 : static_cast<int>(wait.count()) + 1;
            pollfd fds[3] = {{fd_.get(), POLLIN, 0}, {ctx_.cancel->fd(), POLLIN, 0}, {candidates.wake_fd(), POLLIN, 0}};
            int r = ::poll(fds, 3, poll_ms);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) return Error::from_errno("poll on " + what_);
            if (fds[1].revents != 0) return Error("migration cancelled");
            if ((fds[0].revents & POLLIN) == 0) continue;
            int c = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (c >= 0) {
                set_nodelay(c);
                candidates.add(UniqueFd(c));
            } else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
                return Error::from_errno("accept on " + what_);
            }
        }
    }

    UniqueFd fd_;
    TransportContext ctx_;
    std::string what_;
    std::string unlink_;
};

struct AddrInfoDeleter {
    void operator()(addrinfo* a) const { ::freeaddrinfo(a); }
};

Result<std::unique_ptr<addrinfo, AddrInfoDeleter>> resolve(const Uri& uri, bool passive) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(uri.host.c_str(), std::to_string(uri.port).c_str(), &hints, &res);
    if (rc != 0) return Error(fmt::format("cannot resolve '{}': {}", uri.host, ::gai_strerror(rc)));
    return std::unique_ptr<addrinfo, AddrInfoDeleter>(res);
}

class TcpTransport final : public Transport {
public:
    std::string scheme() const override { return "tcp"; }
    bool carries_tls() const override { return true; }

    Result<std::unique_ptr<Connection>> connect(const TransportContext& ctx) override {
        auto ai = resolve(ctx.uri, false);
        if (!ai) return ai.error();
        Error last("no address");
        for (addrinfo* a = ai->get(); a != nullptr; a = a->ai_next) {
            OpenFd open = [&]() -> Result<UniqueFd> {
                auto fd = connect_addr(a->ai_addr, a->ai_addrlen, a->ai_family, ctx, ctx.uri.text);
                if (fd) set_nodelay(fd->get());
                return fd;
            };
            auto fd = open();
            if (!fd) {
                last = fd.error();
                if (ctx.cancel->cancelled()) break;
                continue;
            }
            return source_connection(std::move(*fd), ctx, open);
        }
        return last;
    }

    Result<std::unique_ptr<Listener>> listen(const TransportContext& ctx) override {
        auto ai = resolve(ctx.uri, true);
        if (!ai) return ai.error();
        addrinfo* a = ai->get();
        UniqueFd fd(::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (!fd) return Error::from_errno("socket for " + ctx.uri.text);
        int one = 1;
        ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) < 0) {
            return Error::from_errno("listen on " + ctx.uri.text, errno, "is another process using the port?");
        }
        if (::listen(fd.get(), kBacklog) < 0) return Error::from_errno("listen on " + ctx.uri.text);
        return std::unique_ptr<Listener>(new SocketListener(std::move(fd), ctx, ctx.uri.text));
    }
};

class UnixTransport final : public Transport {
public:
    std::string scheme() const override { return "unix"; }
    bool carries_tls() const override { return true; }

    Result<std::unique_ptr<Connection>> connect(const TransportContext& ctx) override {
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::memcpy(addr.sun_path, ctx.uri.path.c_str(), ctx.uri.path.size() + 1);
        OpenFd open = [&] { return connect_addr(reinterpret_cast<sockaddr*>(&addr), sizeof(addr), AF_UNIX, ctx, ctx.uri.text); };
        auto fd = open();
        if (!fd) return fd.error();
        return source_connection(std::move(*fd), ctx, open);
    }

    Result<std::unique_ptr<Listener>> listen(const TransportContext& ctx) override {
        struct stat st{};
        if (::lstat(ctx.uri.path.c_str(), &st) == 0) {
            if (!S_ISSOCK(st.st_mode)) return Error(ctx.uri.path + " exists and is not a socket: choose another path");
            ::unlink(ctx.uri.path.c_str());
        }
        UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (!fd) return Error::from_errno("socket for " + ctx.uri.text);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::memcpy(addr.sun_path, ctx.uri.path.c_str(), ctx.uri.path.size() + 1);
        if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) {
            return Error::from_errno("listen on " + ctx.uri.text);
        }
        if (::listen(fd.get(), kBacklog) < 0) return Error::from_errno("listen on " + ctx.uri.text);
        return std::unique_ptr<Listener>(new SocketListener(std::move(fd), ctx, ctx.uri.text, ctx.uri.path));
    }
};

}  // namespace

std::unique_ptr<Transport> make_tcp_transport() { return std::make_unique<TcpTransport>(); }
std::unique_ptr<Transport> make_unix_transport() { return std::make_unique<UnixTransport>(); }

std::unique_ptr<stream::ByteStream> make_socket_stream(UniqueFd fd, const TransportContext& ctx, std::string peer) {
    // Splicing pays where the kernel would otherwise copy RAM into a NIC's buffers; to a peer on
    // this host (loopback, unix) the receiver copies from the spliced pages anyway, and the
    // per-page pipe and reference work made it slower than one copy (docs/performance.md).
    Options options = ctx.options();
    const Capabilities& caps = options.caps;
    bool zero_copy = caps.zero_copy_send && (caps.zero_copy_local || !stream::peer_on_this_host(fd.get()));
    return std::make_unique<stream::SocketStream>(std::move(fd), *ctx.cancel, std::chrono::milliseconds(options.params.io_timeout_ms),
                                          std::move(peer), zero_copy);
}

}  // namespace vmm::migration

// Opening and accepting the lanes of a multifd migration (the hellos: multifd_wire.h).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

#include "vmm/migration/transport/multifd.h"

namespace vmm::migration {

bool peer_on_this_host(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) < 0) return false;
    if (ss.ss_family == AF_UNIX) return true;
    if (ss.ss_family == AF_INET) {
        return (ntohl(reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss.ss_family == AF_INET6) {
        const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
    }
    return false;
}

std::unique_ptr<SocketStream> make_socket_stream(UniqueFd fd, const TransportContext& ctx, std::string peer) {
    // Splicing pays where the kernel would otherwise copy RAM into a NIC's buffers; to a peer on
    // this host (loopback, unix) the receiver copies from the spliced pages anyway, and the
    // per-page pipe and reference work made it slower than one copy (docs/performance.md).
    Options options = ctx.options();
    const Capabilities& caps = options.caps;
    bool zero_copy = caps.zero_copy_send && (caps.zero_copy_local || !peer_on_this_host(fd.get()));
    return std::make_unique<SocketStream>(std::move(fd), *ctx.cancel, std::chrono::milliseconds(options.params.io_timeout_ms),
                                          std::move(peer), zero_copy);
}

Result<SideConnections> open_side_connections(SocketStream& main, uint32_t count, bool preempt, const OpenFd& connect,
                                              const TransportContext& ctx) {
    auto session = new_session_id();
    if (!session) return session.error();
    auto preface = encode_hello({Hello::Kind::preface, count | (preempt ? kPrefacePreempt : 0), *session});
    if (auto s = main.write(preface); !s) return s.error();
    if (auto s = main.flush(); !s) return s.error();
    SideConnections side;
    auto open = [&](Hello hello, std::string what) -> Result<std::unique_ptr<SocketStream>> {
        auto fd = connect();
        if (!fd) return fd.error().context("opening " + what);
        auto c = make_socket_stream(std::move(*fd), ctx, fmt::format("destination {} ({})", ctx.uri.text, what));
        auto bytes = encode_hello(hello);
        if (auto s = c->write(bytes); !s) return s.error();
        if (auto s = c->flush(); !s) return s.error();
        return c;
    };
    for (uint32_t i = 0; i < count; ++i) {
        auto lane = open({Hello::Kind::lane, i, *session}, fmt::format("multifd lane {} of {}", i, count));
        if (!lane) return lane.error();
        side.lanes.push_back(std::move(*lane));
    }
    if (preempt) {
        auto c = open({Hello::Kind::preempt, 0, *session}, "the postcopy-preempt connection");
        if (!c) return c.error();
        side.preempt = std::move(*c);
    }
    return side;
}
static Result<Hello> read_hello(SocketStream& in, std::span<const uint8_t, 8> first) {
    std::array<uint8_t, kHelloSize> bytes{};
    std::copy(first.begin(), first.end(), bytes.begin());
    if (auto s = in.read_exact(std::span(bytes).subspan(8)); !s) return s.error();
    return decode_hello(bytes);
}

// Accepts the preface's connections in any order; each must carry the session id, a lane a new
// index, and a preempt connection must have been announced and come once.
static Result<SideConnections> accept_announced(const Hello& preface, const OpenFd& accept, const TransportContext& ctx) {
    SideConnections side;
    side.lanes.resize(preface.lanes());
    uint32_t expected = preface.lanes() + (preface.preempt() ? 1 : 0);
    for (uint32_t n = 0; n < expected; ++n) {
        auto fd = accept();
        if (!fd) return fd.error().context(fmt::format("waiting for connection {} of the {} the preface announced", n + 1, expected));
        auto c = make_socket_stream(std::move(*fd), ctx, "the migration source (a side connection)");
        std::array<uint8_t, 8> first{};
        if (auto s = c->read_exact(first); !s) return s.error();
        auto h = read_hello(*c, first);
        if (!h) return h.error();
        if (h->kind == Hello::Kind::preface || h->session != preface.session) {
            return Error("multifd: a connection that is not a lane of this migration arrived while its lanes were "
                         "expected (another source on the same port?)");
        }
        if (h->kind == Hello::Kind::preempt) {
            if (!preface.preempt() || side.preempt) {
                return Error("multifd: a postcopy-preempt connection the preface did not announce, or a second one");
            }
            c->rename("the migration source (postcopy-preempt)");
            side.preempt = std::move(c);
            continue;
        }
        if (h->value >= preface.lanes() || side.lanes[h->value]) {
            return Error(fmt::format("multifd: lane index {} is out of range or repeated ({} lanes announced)",
                                     h->value, preface.lanes()));
        }
        c->rename("the migration source (a multifd lane)");
        side.lanes[h->value] = std::move(c);
    }
    return side;
}

Result<SideConnections> accept_side_connections(SocketStream& main, const OpenFd& accept, const TransportContext& ctx) {
    std::array<uint8_t, 8> first{};
    if (auto s = main.read_exact(first); !s) return s.error();
    if (!starts_with_preface(first)) {
        if (std::equal(first.begin(), first.end(), kLaneMagic.begin()) ||
            std::equal(first.begin(), first.end(), kPreemptMagic.begin())) {
            return Error("multifd: a lane connected before its migration's main connection");
        }
        main.unread(first);  // an ordinary migration stream
        return SideConnections{};
    }
    auto preface = read_hello(main, first);
    if (!preface) return preface.error();
    return accept_announced(*preface, accept, ctx);
}

}  // namespace vmm::migration

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
    const Capabilities& caps = ctx.options->caps;
    bool zero_copy = caps.zero_copy_send && (caps.zero_copy_local || !peer_on_this_host(fd.get()));
    return std::make_unique<SocketStream>(std::move(fd), *ctx.cancel,
                                          std::chrono::milliseconds(ctx.options->params.io_timeout_ms),
                                          std::move(peer), zero_copy);
}

Result<Lanes> open_source_lanes(SocketStream& main, uint32_t count, const OpenFd& connect,
                                const TransportContext& ctx) {
    auto session = new_session_id();
    if (!session) return session.error();
    auto preface = encode_hello({Hello::Kind::preface, count, *session});
    if (auto s = main.write(preface); !s) return s.error();
    if (auto s = main.flush(); !s) return s.error();
    Lanes lanes;
    for (uint32_t i = 0; i < count; ++i) {
        auto fd = connect();
        if (!fd) return fd.error().context(fmt::format("opening multifd lane {} of {}", i, count));
        auto lane = make_socket_stream(std::move(*fd), ctx, fmt::format("destination {} (multifd lane {})", ctx.uri.text, i));
        auto hello = encode_hello({Hello::Kind::lane, i, *session});
        if (auto s = lane->write(hello); !s) return s.error();
        if (auto s = lane->flush(); !s) return s.error();
        lanes.push_back(std::move(lane));
    }
    return lanes;
}

static Result<Hello> read_hello(SocketStream& in, std::span<const uint8_t, 8> first) {
    std::array<uint8_t, kHelloSize> bytes{};
    std::copy(first.begin(), first.end(), bytes.begin());
    if (auto s = in.read_exact(std::span(bytes).subspan(8)); !s) return s.error();
    return decode_hello(bytes);
}

// Accepts the preface's lanes in any order; each must carry the session id and a new index.
static Result<Lanes> accept_lanes(const Hello& preface, const OpenFd& accept, const TransportContext& ctx) {
    Lanes lanes(preface.value);
    for (uint32_t n = 0; n < preface.value; ++n) {
        auto fd = accept();
        if (!fd) return fd.error().context(fmt::format("waiting for multifd lane {} of {}", n + 1, preface.value));
        auto lane = make_socket_stream(std::move(*fd), ctx, "the migration source (a multifd lane)");
        std::array<uint8_t, 8> first{};
        if (auto s = lane->read_exact(first); !s) return s.error();
        auto h = read_hello(*lane, first);
        if (!h) return h.error();
        if (h->kind != Hello::Kind::lane || h->session != preface.session) {
            return Error("multifd: a connection that is not a lane of this migration arrived while its lanes were "
                         "expected (another source on the same port?)");
        }
        if (h->value >= preface.value || lanes[h->value]) {
            return Error(fmt::format("multifd: lane index {} is out of range or repeated ({} lanes announced)",
                                     h->value, preface.value));
        }
        lanes[h->value] = std::move(lane);
    }
    return lanes;
}

Result<Lanes> accept_dest_lanes(SocketStream& main, const OpenFd& accept, const TransportContext& ctx) {
    std::array<uint8_t, 8> first{};
    if (auto s = main.read_exact(first); !s) return s.error();
    if (!starts_with_preface(first)) {
        if (std::equal(first.begin(), first.end(), kLaneMagic.begin())) {
            return Error("multifd: a lane connected before its migration's main connection");
        }
        main.unread(first);  // an ordinary migration stream
        return Lanes{};
    }
    auto preface = read_hello(main, first);
    if (!preface) return preface.error();
    return accept_lanes(*preface, accept, ctx);
}

}  // namespace vmm::migration

// Opening and accepting the lanes of a multifd migration (the hellos: multifd_wire.h).
#include <fmt/format.h>

#include <algorithm>

#include "vmm/common/log.h"
#include "vmm/migration/transport/multifd.h"

namespace vmm::migration {

Result<SideConnections> open_side_connections(stream::ByteStream& main, uint32_t count, bool preempt, const OpenStream& connect) {
    auto session = new_session_id();
    if (!session) return session.error();
    auto preface = encode_hello({Hello::Kind::preface, count | (preempt ? kPrefacePreempt : 0), *session});
    if (auto s = main.write(preface); !s) return s.error();
    if (auto s = main.flush(); !s) return s.error();
    SideConnections side;
    auto open = [&](Hello hello, std::string what) -> Result<std::unique_ptr<stream::ByteStream>> {
        auto c = connect(fmt::format("the destination ({})", what));
        if (!c) return c.error().context("opening " + what);
        auto bytes = encode_hello(hello);
        if (auto s = (*c)->write(bytes); !s) return s.error();
        if (auto s = (*c)->flush(); !s) return s.error();
        return std::move(*c);
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
static Result<Hello> read_hello(stream::ByteStream& in, std::span<const uint8_t, 8> first) {
    std::array<uint8_t, kHelloSize> bytes{};
    std::copy(first.begin(), first.end(), bytes.begin());
    if (auto s = in.read_exact(std::span(bytes).subspan(8)); !s) return s.error();
    return decode_hello(bytes);
}

// Accepts the preface's connections in any order; each must carry the session id, a lane a new
// index, and a preempt connection must have been announced and come once.
static Result<SideConnections> accept_announced(const Hello& preface, const OpenStream& accept) {
    SideConnections side;
    side.lanes.resize(preface.lanes());
    uint32_t expected = preface.lanes() + (preface.preempt() ? 1 : 0);
    for (uint32_t n = 0; n < expected;) {
        auto accepted = accept("the migration source (a side connection)");
        if (!accepted) {
            return accepted.error().context(fmt::format("waiting for connection {} of the {} the preface announced", n + 1, expected));
        }
        std::unique_ptr<stream::ByteStream> c = std::move(*accepted);
        std::array<uint8_t, 8> first{};
        if (auto s = c->read_exact(first); !s) return s.error();
        auto h = read_hello(*c, first);
        if (!h) return h.error();
        if (h->kind == Hello::Kind::preface || h->session != preface.session) {
            // Another source's, or nobody's: it goes, and this migration's lanes are waited for on.
            log::warn("multifd: dropped a connection that is not a lane of this migration (another source on the same port?)");
            continue;
        }
        ++n;
        if (h->kind == Hello::Kind::preempt) {
            if (!preface.preempt() || side.preempt) {
                return Error("multifd: a postcopy-preempt connection the preface did not announce, or a second one");
            }
            c->set_peer("the migration source (postcopy-preempt)");
            side.preempt = std::move(c);
            continue;
        }
        if (h->value >= preface.lanes() || side.lanes[h->value]) {
            return Error(fmt::format("multifd: lane index {} is out of range or repeated ({} lanes announced)",
                                     h->value, preface.lanes()));
        }
        c->set_peer("the migration source (a multifd lane)");
        side.lanes[h->value] = std::move(c);
    }
    return side;
}

Result<SideConnections> accept_side_connections(stream::ByteStream& main, const OpenStream& accept) {
    std::array<uint8_t, 8> first{};
    if (auto s = main.read_exact(first); !s) return s.error();
    if (!starts_with_preface(first)) {
        if (std::equal(first.begin(), first.end(), kLaneMagic.begin()) ||
            std::equal(first.begin(), first.end(), kPreemptMagic.begin())) {
            return Error("multifd: a lane connected before its migration's main connection");
        }
        if (auto s = main.unread(first); !s) return s.error();  // an ordinary migration stream
        return SideConnections{};
    }
    auto preface = read_hello(main, first);
    if (!preface) return preface.error();
    return accept_announced(*preface, accept);
}

}  // namespace vmm::migration

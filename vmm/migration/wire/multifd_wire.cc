#include "vmm/migration/wire/multifd_wire.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <algorithm>

#include "vmm/common/bytes.h"

namespace vmm::migration {

std::array<uint8_t, kHelloSize> encode_hello(const Hello& h) {
    ByteWriter w;
    w.put_bytes(h.kind == Hello::Kind::preface ? kPrefaceMagic : h.kind == Hello::Kind::lane ? kLaneMagic : kPreemptMagic);
    w.put(kMultifdVersion);
    w.put(h.value);
    w.put(h.session);
    std::array<uint8_t, kHelloSize> out{};
    std::copy(w.bytes().begin(), w.bytes().end(), out.begin());
    return out;
}

Result<Hello> decode_hello(std::span<const uint8_t, kHelloSize> bytes) {
    ByteReader r(bytes, "multifd hello");
    std::array<uint8_t, 8> magic{};
    uint32_t version = 0;
    Hello h;
    if (auto s = r.get_bytes(magic); !s) return s.error();
    if (auto s = r.get(version); !s) return s.error();
    if (auto s = r.get(h.value); !s) return s.error();
    if (auto s = r.get(h.session); !s) return s.error();
    if (magic == kPrefaceMagic) h.kind = Hello::Kind::preface;
    else if (magic == kLaneMagic) h.kind = Hello::Kind::lane;
    else if (magic == kPreemptMagic) h.kind = Hello::Kind::preempt;
    else return Error("multifd: a connection began with neither a preface nor a lane or preempt hello");
    if (version != kMultifdVersion) {
        return Error(fmt::format("multifd version {} is not supported (this vmm speaks {}): use the same vmm on "
                                 "both sides, or turn the multifd capability off",
                                 version, kMultifdVersion));
    }
    if (h.kind == Hello::Kind::preface && (h.value & ~(kPrefacePreempt | 0xffffu)) != 0) {
        return Error(fmt::format("multifd preface with unknown flags {:#x}: use the same vmm on both sides", h.value));
    }
    if (h.kind == Hello::Kind::preface && (h.lanes() > kMaxLanes || (h.lanes() == 0 && !h.preempt()))) {
        return Error(fmt::format("multifd preface announces {} lanes (1 to {} allowed, or none with a preempt connection)",
                                 h.lanes(), kMaxLanes));
    }
    if (h.kind == Hello::Kind::preempt && h.value != 0) {
        return Error(fmt::format("multifd: a preempt connection's hello carries {} where 0 belongs", h.value));
    }
    if (h.kind == Hello::Kind::lane && h.value >= kMaxLanes) {
        return Error(fmt::format("multifd lane index {} is out of range (below {})", h.value, kMaxLanes));
    }
    return h;
}

bool starts_with_preface(std::span<const uint8_t, 8> first) {
    return std::equal(first.begin(), first.end(), kPrefaceMagic.begin());
}

Result<uint64_t> new_session_id() {
    uint64_t id = 0;
    if (::getrandom(&id, sizeof(id), 0) != static_cast<ssize_t>(sizeof(id))) {
        return Error::from_errno("getrandom for the multifd session id");
    }
    return id;
}

}  // namespace vmm::migration

#include "pull_wire.h"

#include <fmt/format.h>

#include "bytes.h"

namespace rdma_migrate {

std::vector<uint8_t> encode_pull_message(const PullMessage& m) {
    Out o;
    o.u32(static_cast<uint32_t>(m.type));
    if (m.type == PullType::offer) {
        o.u32(m.version);
        o.u64(m.length);
        o.u64(m.address);
        o.u32(m.rkey);
        o.u32(m.reads);
    } else {
        o.u32(0);
        o.u64(m.bytes);
    }
    o.zeros(kPullMessageSize - o.b.size());
    return std::move(o.b);
}

vmm::Result<PullMessage> decode_pull_message(std::span<const uint8_t> bytes) {
    if (bytes.size() != kPullMessageSize) {
        return vmm::Error(fmt::format("rdma-pull: a message of {} bytes (they are {})", bytes.size(), kPullMessageSize));
    }
    In in(bytes);
    PullMessage m;
    uint32_t type = in.u32();
    size_t used = 0;
    if (type == static_cast<uint32_t>(PullType::offer)) {
        m.type = PullType::offer;
        m.version = in.u32();
        m.length = in.u64();
        m.address = in.u64();
        m.rkey = in.u32();
        m.reads = in.u32();
        used = 32;
        if (m.version != kPullVersion) {
            return vmm::Error(fmt::format("rdma-pull: the server speaks version {}, this side {}: use the same vmm on both",
                                          m.version, kPullVersion));
        }
        if (m.length == 0 || m.length > kPullMaxLength || m.address + m.length < m.address) {
            return vmm::Error(fmt::format("rdma-pull: an offer of {} bytes at {:#x}", m.length, m.address));
        }
        if (m.reads == 0 || m.reads > 255) return vmm::Error(fmt::format("rdma-pull: an offer of {} READs at once", m.reads));
    } else if (type == static_cast<uint32_t>(PullType::pulled) || type == static_cast<uint32_t>(PullType::done)) {
        m.type = static_cast<PullType>(type);
        if (in.u32() != 0) return vmm::Error("rdma-pull: a message whose padding is not zero");
        m.bytes = in.u64();
        used = 16;
    } else {
        return vmm::Error(fmt::format("rdma-pull: a message of unknown type {}", type));
    }
    for (uint8_t b : bytes.subspan(used))
        if (b != 0) return vmm::Error("rdma-pull: a message whose padding is not zero");
    return m;
}

}  // namespace rdma_migrate

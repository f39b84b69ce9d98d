#include "postcopy_wire.h"

#include <fmt/format.h>

#include "bytes.h"
#include "chunks.h"

namespace rdma_migrate {

std::vector<uint8_t> encode_pc_message(const PcMessage& m) {
    Out o;
    o.u32(static_cast<uint32_t>(m.type));
    switch (m.type) {
        case PcType::hello:
            o.u32(m.rkey), o.u32(m.request_slots), o.u32(m.push_slots), o.u64(m.landing), o.u64(m.slot_size);
            break;
        case PcType::request: o.u32(m.slot), o.u32(m.block), o.u32(m.pages), o.u64(m.offset), o.u64(0); break;
        case PcType::credit: o.u32(0), o.u32(0), o.u32(0), o.u64(0), o.u64(m.consumed); break;
        case PcType::done: o.zeros(kPcMessageSize - 4); break;
        case PcType::have: o.u32(0), o.u32(m.block), o.u32(m.pages), o.u64(m.offset), o.u64(0); break;
    }
    return std::move(o.b);
}

namespace {

Status check_hello(const PcMessage& m) {
    if (m.request_slots == 0 || m.request_slots > kPcMaxSlots || m.push_slots == 0 || m.push_slots > kPcMaxSlots) {
        return Error(fmt::format("RDMA postcopy HELLO: {} request slots and {} push slots (each must be 1..{})",
                                 m.request_slots, m.push_slots, kPcMaxSlots));
    }
    if (m.slot_size != kPcSlotSize) {
        return Error(fmt::format("RDMA postcopy HELLO: slots of {} bytes, where the protocol has {}", m.slot_size, kPcSlotSize));
    }
    if (m.landing == 0 || m.landing % kPcPage != 0) {
        return Error(fmt::format("RDMA postcopy HELLO: landing area at {:#x} is not page-aligned", m.landing));
    }
    uint64_t span = uint64_t{m.request_slots + m.push_slots} * kPcSlotSize;
    if (m.landing + span < m.landing) return Error("RDMA postcopy HELLO: the landing area wraps around the address space");
    return {};
}

}  // namespace

Result<PcMessage> decode_pc_message(std::span<const uint8_t> bytes) {
    if (bytes.size() != kPcMessageSize) {
        return Error(fmt::format("RDMA postcopy channel: a message of {} bytes, where every one has {}", bytes.size(),
                                 kPcMessageSize));
    }
    In in(bytes);
    PcMessage m;
    uint32_t type = in.u32();
    uint32_t a = in.u32(), b = in.u32(), c = in.u32();
    uint64_t d = in.u64(), e = in.u64();
    switch (type) {
        case static_cast<uint32_t>(PcType::hello):
            m = {PcType::hello, a, b, c, d, e};
            if (auto s = check_hello(m); !s) return s.error();
            return m;
        case static_cast<uint32_t>(PcType::request):
            m.type = PcType::request, m.slot = a, m.block = b, m.pages = c, m.offset = d;
            if (m.pages == 0 || m.pages > kPcMaxPages || m.offset % kPcPage != 0) {
                return Error(fmt::format("RDMA postcopy REQUEST: {} pages at offset {:#x} (1..{} whole pages)", m.pages,
                                         m.offset, kPcMaxPages));
            }
            return m;
        case static_cast<uint32_t>(PcType::credit): m.type = PcType::credit, m.consumed = e; return m;
        case static_cast<uint32_t>(PcType::done): m.type = PcType::done; return m;
        case static_cast<uint32_t>(PcType::have):
            m.type = PcType::have, m.block = b, m.pages = c, m.offset = d;
            if (m.pages == 0 || m.pages > kPcMaxHave || m.offset % kPcPage != 0) {
                return Error(fmt::format("RDMA postcopy HAVE: {} pages at offset {:#x} (1..{} whole pages)", m.pages, m.offset,
                                         kPcMaxHave));
            }
            return m;
        default: return Error(fmt::format("RDMA postcopy channel: unknown message type {}", type));
    }
}

uint32_t encode_pc_immediate(const PcImmediate& imm) {
    return (uint32_t{static_cast<uint8_t>(imm.kind)} << 24) | (uint32_t{imm.slot} << 8) | imm.pages;
}

Result<PcImmediate> decode_pc_immediate(uint32_t value, uint32_t slots) {
    PcImmediate imm;
    uint32_t kind = value >> 24;
    imm.slot = static_cast<uint16_t>(value >> 8);
    imm.pages = static_cast<uint8_t>(value);
    if (kind == static_cast<uint32_t>(PcKind::end)) {
        if (imm.slot != 0 || imm.pages != 0) return Error(fmt::format("RDMA postcopy: END immediate {:#x} carries fields", value));
        imm.kind = PcKind::end;
        return imm;
    }
    if (kind != static_cast<uint32_t>(PcKind::data) && kind != static_cast<uint32_t>(PcKind::zero) &&
        kind != static_cast<uint32_t>(PcKind::keys) && kind != static_cast<uint32_t>(PcKind::pull)) {
        return Error(fmt::format("RDMA postcopy: a write with immediate {:#x} of unknown kind {}", value, kind));
    }
    imm.kind = static_cast<PcKind>(kind);
    if (imm.slot >= slots) return Error(fmt::format("RDMA postcopy: a write into slot {}, of {}", imm.slot, slots));
    if (imm.kind == PcKind::keys || imm.kind == PcKind::pull) {
        if (imm.pages == 0) return Error(imm.kind == PcKind::keys ? "RDMA postcopy: KEYS with no region" : "RDMA postcopy: PULL with no run");
        return imm;
    }
    if (imm.pages == 0 || imm.pages > kPcMaxPages) {
        return Error(fmt::format("RDMA postcopy: a write of {} pages (1..{})", imm.pages, kPcMaxPages));
    }
    return imm;
}

std::vector<uint8_t> encode_pc_regions(std::span<const PcRegion> regions, bool tagged) {
    Out o;
    for (const PcRegion& r : regions) {
        o.u32(r.block), o.u32(r.rkey), o.u64(r.offset), o.u64(r.length), o.u64(r.address);
        if (tagged) o.u32(r.tag_rkey), o.u32(0), o.u64(r.tags);
    }
    return std::move(o.b);
}

Result<std::vector<PcRegion>> decode_pc_regions(std::span<const uint8_t> bytes, uint32_t count, bool tagged) {
    size_t size = tagged ? kPcTaggedRegionSize : kPcRegionSize;
    if (count == 0 || count > kPcMaxRegions || bytes.size() < count * size) {
        return Error(fmt::format("RDMA postcopy KEYS: {} regions ({} bytes of room; 1..{} regions)", count, bytes.size(),
                                 kPcMaxRegions));
    }
    In in(bytes);
    std::vector<PcRegion> out;
    for (uint32_t i = 0; i < count; ++i) {
        PcRegion r;
        r.block = in.u32(), r.rkey = in.u32(), r.offset = in.u64(), r.length = in.u64(), r.address = in.u64();
        bool aligned = r.offset % kPcPage == 0 && r.length % kPcPage == 0 && r.address % kPcPage == 0;
        if (!aligned || r.length == 0 || r.address == 0 || r.address + r.length < r.address) {
            return Error(fmt::format("RDMA postcopy KEYS: region {} ({} bytes at offset {:#x}, address {:#x}) is not whole, "
                                     "aligned pages",
                                     i, r.length, r.offset, r.address));
        }
        if (tagged) {
            r.tag_rkey = in.u32();
            (void)in.u32();
            r.tags = in.u64();
            uint64_t table = r.length / kPcPage * kPcTagSize;
            if (r.tags == 0 || r.tags % kPcTagSize != 0 || r.tags + table < r.tags) {
                return Error(fmt::format("RDMA postcopy KEYS: region {}'s page tags ({} bytes at address {:#x}) are not an "
                                         "aligned table",
                                         i, table, r.tags));
            }
        }
        out.push_back(r);
    }
    return out;
}

std::vector<uint8_t> encode_pc_trailer(const PcTrailer& t) {
    Out o;
    o.u32(t.block);
    o.u32((uint32_t{t.pages} << 16) | t.flags);
    o.u64(t.offset);
    for (uint64_t s : t.sums) o.u64(s);
    return std::move(o.b);
}

void encode_pc_tag(std::vector<uint8_t>& trailer, uint64_t tag) {
    for (int i = 7; i >= 0; --i) trailer.push_back(static_cast<uint8_t>(tag >> (8 * i)));
}

Result<PcTrailer> decode_pc_trailer(std::span<const uint8_t> bytes) {
    if (bytes.size() < kPcTrailerSize) return Error("RDMA postcopy: no room for a write's trailer in its slot");
    In in(bytes);
    PcTrailer t;
    t.block = in.u32();
    uint32_t w = in.u32();
    t.pages = static_cast<uint16_t>(w >> 16);
    t.flags = static_cast<uint16_t>(w);
    t.offset = in.u64();
    if ((t.flags & ~(kPcSummed | kPcTagged)) != 0) return Error(fmt::format("RDMA postcopy: trailer flags {:#x} unknown", t.flags));
    if (t.pages == 0 || t.pages > kPcMaxPages || t.offset % kPcPage != 0) {
        return Error(fmt::format("RDMA postcopy: a trailer for {} pages at offset {:#x} (1..{} whole pages)", t.pages,
                                 t.offset, kPcMaxPages));
    }
    size_t sums = (t.flags & kPcSummed) != 0 ? t.pages * 8u : 0;
    size_t tag = (t.flags & kPcTagged) != 0 ? 8 : 0;
    if (bytes.size() < kPcTrailerSize + sums + tag) return Error("RDMA postcopy: the trailer's sums or tag overrun the slot");
    for (size_t i = 0; i < sums / 8; ++i) t.sums.push_back(in.u64());
    if (tag != 0) t.tag = in.u64();
    return t;
}

Status check_pc_range(const std::vector<LocalBlock>& blocks, uint32_t block, uint64_t offset, uint64_t pages) {
    if (block >= blocks.size()) {
        return Error(fmt::format("RDMA postcopy: block {} does not exist (there are {})", block, blocks.size()));
    }
    const LocalBlock& b = blocks[block];
    if (offset % kPcPage != 0 || pages == 0 || offset > b.size || pages > (b.size - offset) / kPcPage) {
        return Error(fmt::format("RDMA postcopy: {} pages at offset {:#x} fall outside RAM block '{}' ({} bytes)", pages,
                                 offset, b.name, b.size));
    }
    return {};
}

std::vector<uint8_t> encode_pc_pulls(const PcPulls& p) {
    Out o;
    o.u64(p.rate);
    for (const PcPullRun& r : p.runs) o.u32(r.block), o.u32(r.pages), o.u64(r.offset);
    return std::move(o.b);
}

Result<PcPulls> decode_pc_pulls(std::span<const uint8_t> bytes, uint32_t count) {
    if (count == 0 || count > kPcMaxPullRuns || bytes.size() < pc_pulls_size(count)) {
        return Error(fmt::format("RDMA postcopy PULL: {} runs ({} bytes of room; 1..{} runs)", count, bytes.size(),
                                 kPcMaxPullRuns));
    }
    In in(bytes);
    PcPulls out;
    out.rate = in.u64();
    for (uint32_t i = 0; i < count; ++i) {
        PcPullRun r;
        r.block = in.u32(), r.pages = in.u32(), r.offset = in.u64();
        if (r.pages == 0 || r.pages > kPcMaxPullPages || r.offset % kPcPage != 0) {
            return Error(fmt::format("RDMA postcopy PULL: run {} ({} pages at offset {:#x}) is not 1 to {} whole pages", i,
                                     r.pages, r.offset, kPcMaxPullPages));
        }
        out.runs.push_back(r);
    }
    return out;
}

}  // namespace rdma_migrate

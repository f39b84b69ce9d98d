// libFuzzer target for what an RDMA migration peer decodes from the other side: RDMA-CM
// private data and control-channel messages of every type, then the bounds checks every
// entry passes before it may touch memory; the postcopy channel's messages, immediates
// and slot trailers (first byte bit 1), with the range check every page passes (with bit 3 as
// an authenticated channel takes them: sealed messages opened, tagged writes checked); and (bit 2)
// an authenticated connection's control messages as its TLS session delivers them, a byte
// stream cut into messages by their headers; (bit 4) a pull's messages (OFFER, PULLED, DONE).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "proto/chunks.h"
#include "proto/postcopy_auth.h"
#include "proto/postcopy_wire.h"
#include "proto/pull_wire.h"
#include "proto/wire.h"

using namespace rdma_migrate;

// A decoded message through its typed decoder and the checks its entries pass.
static void check(const Message& m, const std::vector<LocalBlock>& blocks) {
    static const ChunkGeometry g = *ChunkGeometry::make(1 << 20);
    switch (m.header.type) {
        case Command::ram_blocks_result:
            if (auto b = decode_blocks(m)) (void)check_block_lists(blocks, *b);
            break;
        case Command::register_request:
            if (auto r = decode_register_entries(m))
                for (const auto& e : *r) (void)check_register_entry(e, blocks, g);
            break;
        case Command::unregister_request:
            if (auto r = decode_register_entries(m))
                for (const auto& e : *r) (void)check_unregister_entry(e, blocks, g);
            break;
        case Command::register_result:
            if (auto r = decode_register_results(m)) {
                BlockDesc remote{0x10000000, 0, 64ull << 20, 0};
                for (const auto& e : *r) (void)check_register_result(e, remote);
            }
            break;
        case Command::compress:
            if (auto c = decode_compress(m))
                for (const auto& e : *c) (void)check_compress(e, blocks);
            break;
        case Command::sums:
            if (auto e = decode_sums(m))
                for (const auto& x : *e) (void)check_sums_entry(x, blocks);
            break;
        case Command::error: (void)decode_error(m); break;
        default: break;
    }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    std::span<const uint8_t> rest(data + 1, size - 1);
    static const std::vector<LocalBlock> blocks = [] {
        std::vector<LocalBlock> b{{"pc.ram", nullptr, 64ull << 20, 0}, {"high", nullptr, 3ull << 20, 1ull << 32}};
        assign_offsets(b);
        return b;
    }();
    if (data[0] & 16) {
        (void)decode_pull_message(rest);
        return 0;
    }
    if (data[0] & 1) {
        (void)decode_private_data(rest);
        return 0;
    }
    if (data[0] & 2) {
        static const std::vector<uint8_t> key(kPcAuthKeySize, 0x5c);
        std::optional<PcKeys> keys;
        if (data[0] & 8) keys = *PcKeys::from(key);
        auto pm = keys ? open_pc_message(rest, keys->messages) : decode_pc_message(rest);
        if (pm && pm->type == PcType::request) (void)check_pc_range(blocks, pm->block, pm->offset, pm->pages);
        if (rest.size() >= 4) {
            uint32_t v = (uint32_t{rest[0]} << 24) | (uint32_t{rest[1]} << 16) | (uint32_t{rest[2]} << 8) | rest[3];
            auto imm = decode_pc_immediate(v, 64);
            if (imm && imm->kind == PcKind::keys) {  // KEYS: regions of the source's RAM to READ
                // Tagged (an authenticated channel's): the tag tables' places, and the KEYS write's tag.
                auto regions = decode_pc_regions(rest.subspan(4), imm->pages, keys.has_value());
                if (regions && keys) (void)open_pc_keys(rest.subspan(4), imm->pages * kPcTaggedRegionSize, keys->writes);
                if (regions)
                    for (const PcRegion& r : *regions) (void)check_pc_range(blocks, r.block, r.offset, r.length / kPcPage);
            } else if (imm && imm->kind == PcKind::pull) {  // PULL: runs the destination reads itself
                auto pulls = decode_pc_pulls(rest.subspan(4), imm->pages);
                if (pulls && keys) (void)open_pc_keys(rest.subspan(4), pc_pulls_size(imm->pages), keys->writes, PcKind::pull);
                if (pulls)
                    for (const PcPullRun& r : pulls->runs) (void)check_pc_range(blocks, r.block, r.offset, r.pages);
            } else if (imm && imm->kind != PcKind::end) {
                // The pages, then the trailer, as in a slot.
                size_t at = std::min<size_t>(rest.size() - 4, imm->kind == PcKind::data ? imm->pages * kPcPage : 0);
                auto slot = rest.subspan(4);
                auto t = decode_pc_trailer(slot.subspan(at));
                if (t && check_pc_range(blocks, t->block, t->offset, t->pages) && keys)
                    (void)check_pc_write(keys->writes, imm->kind, *t, slot.subspan(at), slot.first(at), blocks[t->block].name);
            }
        }
        return 0;
    }
    if (data[0] & 4) {
        while (auto n = message_size_in_stream(rest)) {
            if (rest.size() < *n) break;
            if (auto m = decode_message(rest.first(*n))) check(*m, blocks);
            rest = rest.subspan(*n);
        }
        return 0;
    }
    if (auto m = decode_message(rest)) check(*m, blocks);
    return 0;
}

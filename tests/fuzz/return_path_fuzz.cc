// libFuzzer target for postcopy's return path (vmm/migration/wire/return_path.h), read as the
// source reads it: a sequence of messages, each a type byte, its fields, and a bitmap's words.
// Any crash or sanitizer report is a bug; so is a decoded request outside the blocks, or a
// message that does not encode back to the bytes it came from. The bitmaps also go through the
// source's recovery collector (postcopy/recovery.h), which must refuse or place each one inside
// its block, and whose result must say no page is held past a block's end. A resumed precopy's
// RECEIVED_ROUNDS go through the source's collector (precopy/resume.h) likewise: never a round
// past the last one the source began.
#include <cstddef>
#include <cstdint>
#include <span>

#include "vmm/migration/postcopy/recovery.h"
#include "vmm/migration/precopy/resume.h"
#include "vmm/migration/wire/return_path.h"

using namespace vmm::migration;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::vector<BlockInfo> blocks = {{"pc.ram", 0, 1 << 20}, {"high", 4 << 20, 256 << 10}};
    std::span<const uint8_t> in(data, size);
    ReceivedPages received(blocks);
    bool collecting = true;
    constexpr uint32_t kLastRound = 3;
    ReportedRounds reported({256, 64}, kLastRound);
    bool reporting = true;
    while (!in.empty()) {
        uint8_t type = in[0];
        auto n = return_body_size(type);
        if (!n || in.size() < 1 + *n) return 0;
        auto m = decode_return(type, in.subspan(1, *n), blocks, 4096);
        if (!m) return 0;
        std::span<const uint8_t> message = in.first(1 + *n);
        in = in.subspan(1 + *n);
        std::vector<uint8_t> again;
        if (m->type == ReturnType::page_request) {
            const BlockInfo& b = blocks.at(m->block);  // checked: a bad index never decodes
            if (m->length == 0 || m->offset + m->length > b.size) __builtin_trap();
            again = encode_page_request(m->block, m->offset, m->length);
        } else if (m->type == ReturnType::received_bitmap) {
            size_t words = bitmap_bytes(*m);
            if (in.size() < words) return 0;
            auto bits = decode_bitmap_words(*m, in.first(words));
            if (!bits) return 0;
            in = in.subspan(words);
            if ((m->first_page + m->page_count) * 4096 > blocks.at(m->block).size) __builtin_trap();
            again = encode_received_bitmap(m->block, m->first_page, m->page_count, *bits);
            if (collecting) collecting = static_cast<bool>(received.add(*m, *bits));
            message = std::span<const uint8_t>(message.data(), message.size() + words);
        } else if (m->type == ReturnType::received_rounds) {
            size_t bytes = rounds_bytes(*m);
            if (in.size() < bytes) return 0;
            auto rounds = decode_rounds(*m, in.first(bytes));
            if (!rounds) return 0;
            in = in.subspan(bytes);
            if ((m->first_page + m->page_count) * 4096 > blocks.at(m->block).size) __builtin_trap();
            again = encode_received_rounds(m->block, m->first_page, *rounds);
            if (reporting) reporting = static_cast<bool>(reported.add(*m, *rounds));
            message = std::span<const uint8_t>(message.data(), message.size() + bytes);
        } else {
            again = encode_postcopy_done();
        }
        if (!std::equal(again.begin(), again.end(), message.begin(), message.end())) __builtin_trap();
    }
    for (const auto& block : reported.rounds())
        for (uint32_t r : block)
            if (r != kNeverArrived && r > kLastRound) __builtin_trap();
    for (size_t b = 0; b < blocks.size(); ++b) {
        uint64_t pages = blocks[b].size / 4096;
        const auto& words = received.bits()[b];
        if (words.size() != (pages + 63) / 64) __builtin_trap();
        if (pages % 64 != 0 && (words.back() >> (pages % 64)) != 0) __builtin_trap();
    }
    return 0;
}

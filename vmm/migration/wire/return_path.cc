#include "vmm/migration/wire/return_path.h"

#include <fmt/format.h>

#include "vmm/common/bytes.h"

namespace vmm::migration {

std::vector<uint8_t> encode_page_request(uint32_t block, uint64_t offset, uint32_t length) {
    ByteWriter w;
    w.put(static_cast<uint8_t>(ReturnType::page_request));
    w.put(block);
    w.put(offset);
    w.put(length);
    return std::move(w).take();
}

std::vector<uint8_t> encode_received_bitmap(uint32_t block, uint64_t first_page, uint32_t page_count,
                                            std::span<const uint64_t> words) {
    ByteWriter w;
    w.put(static_cast<uint8_t>(ReturnType::received_bitmap));
    w.put(block);
    w.put(first_page);
    w.put(page_count);
    for (uint64_t word : words) w.put(word);
    return std::move(w).take();
}

std::vector<uint8_t> encode_postcopy_done() { return {static_cast<uint8_t>(ReturnType::postcopy_done)}; }

std::vector<uint8_t> encode_received_rounds(uint32_t block, uint64_t first_page, std::span<const uint32_t> rounds) {
    ByteWriter w;
    w.put(static_cast<uint8_t>(ReturnType::received_rounds));
    w.put(block);
    w.put(first_page);
    w.put(static_cast<uint32_t>(rounds.size()));
    for (uint32_t r : rounds) w.put(r);
    return std::move(w).take();
}

Result<size_t> return_body_size(uint8_t type) {
    switch (type) {
        case 0xA0:
        case 0xA1:
        case 0xA3: return size_t{16};  // block, u64 offset or first page, u32 length or count
        case 0xA2: return size_t{0};
        default: break;
    }
    return Error(fmt::format("postcopy return path: unknown message type {:#04x}", type));
}

// RECEIVED_ROUNDS' range: 1 to kMaxRoundsPages pages inside the block.
static Result<ReturnMessage> decode_rounds_range(ReturnMessage m, uint64_t first, uint32_t count,
                                                 const std::vector<BlockInfo>& blocks, uint32_t page_size) {
    if (count == 0 || count > kMaxRoundsPages) {
        return Error(fmt::format("precopy resume: rounds for {} pages (1 to {})", count, kMaxRoundsPages));
    }
    if (first > UINT64_MAX / page_size) return Error("precopy resume: rounds beyond any RAM block");
    if (auto s = check_page_range(m.block, first * page_size, uint64_t{count} * page_size, blocks, page_size); !s) {
        return s.error();
    }
    m.first_page = first;
    m.page_count = count;
    return m;
}

Result<ReturnMessage> decode_return(uint8_t type, std::span<const uint8_t> body, const std::vector<BlockInfo>& blocks,
                                    uint32_t page_size) {
    auto size = return_body_size(type);
    if (!size) return size.error();
    if (body.size() != *size) return Error("postcopy return path: a message ended early (truncated)");
    ReturnMessage m;
    m.type = static_cast<ReturnType>(type);
    if (m.type == ReturnType::postcopy_done) return m;
    ByteReader in(body, "postcopy return path");
    uint64_t position = 0;
    uint32_t count = 0;
    for (Status s : {in.get(m.block), in.get(position), in.get(count)})
        if (!s) return s.error();
    if (m.type == ReturnType::page_request) {
        if (count > kMaxRequestBytes) {
            return Error(fmt::format("postcopy return path: a request for {} bytes exceeds {}", count, kMaxRequestBytes));
        }
        if (auto s = check_page_range(m.block, position, count, blocks, page_size); !s) return s.error();
        m.offset = position;
        m.length = count;
        return m;
    }
    if (m.type == ReturnType::received_rounds) return decode_rounds_range(m, position, count, blocks, page_size);
    if (position % 64 != 0) return Error(fmt::format("postcopy return path: a bitmap starting at page {} is not 64-aligned", position));
    if (count == 0 || count > kMaxBitmapPages) {
        return Error(fmt::format("postcopy return path: a bitmap of {} pages (1 to {})", count, kMaxBitmapPages));
    }
    // The pages it covers: inside the block, computed without overflow (position < 2^64 / page size
    // is checked by the range check of its byte form).
    if (position > UINT64_MAX / page_size) return Error("postcopy return path: a bitmap beyond any RAM block");
    if (auto s = check_page_range(m.block, position * page_size, uint64_t{count} * page_size, blocks, page_size); !s) {
        return s.error();
    }
    m.first_page = position;
    m.page_count = count;
    return m;
}

Result<std::vector<uint64_t>> decode_bitmap_words(const ReturnMessage& m, std::span<const uint8_t> bytes) {
    if (m.type != ReturnType::received_bitmap) return Error("postcopy return path: words for a message that has none");
    if (bytes.size() != bitmap_bytes(m)) return Error("postcopy return path: a bitmap ended early (truncated)");
    ByteReader in(bytes, "postcopy return path");
    std::vector<uint64_t> words(bytes.size() / 8);
    for (uint64_t& w : words)
        if (auto s = in.get(w); !s) return s.error();
    uint32_t tail = m.page_count % 64;
    if (tail != 0 && (words.back() >> tail) != 0) {
        return Error(fmt::format("postcopy return path: the bitmap sets bits past its {} pages", m.page_count));
    }
    return words;
}

}  // namespace vmm::migration

namespace vmm::migration {

Result<std::vector<uint32_t>> decode_rounds(const ReturnMessage& m, std::span<const uint8_t> bytes) {
    if (m.type != ReturnType::received_rounds) return Error("precopy resume: rounds for a message that has none");
    if (bytes.size() != rounds_bytes(m)) return Error("precopy resume: the rounds ended early (truncated)");
    ByteReader in(bytes, "precopy resume");
    std::vector<uint32_t> rounds(m.page_count);
    for (uint32_t& r : rounds)
        if (auto s = in.get(r); !s) return s.error();
    return rounds;
}

}  // namespace vmm::migration

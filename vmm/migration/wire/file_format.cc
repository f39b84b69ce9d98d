#include "vmm/migration/wire/file_format.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "vmm/common/bytes.h"
#include "vmm/common/zero_page.h"

namespace vmm::migration {

namespace {

constexpr uint64_t kPage = kStreamPageSize;
constexpr size_t kSumAt = kFileHeaderSize - 8;  // the header's own sum: its last 8 bytes

uint64_t round_up(uint64_t n) { return (n + kPage - 1) / kPage * kPage; }

struct Area {
    uint64_t begin, end;
    std::string what;
};

// Every area whole pages, after the header, and no two overlapping.
Status check_areas(const FileHeader& h) {
    std::vector<Area> areas;
    for (const auto& b : h.blocks) {
        areas.push_back({b.ram_offset, b.ram_offset + b.size, fmt::format("block '{}'", b.name)});
        areas.push_back({b.sums_offset, b.sums_offset + sums_bytes(b.size), fmt::format("the sums of block '{}'", b.name)});
    }
    areas.push_back({h.stream_offset, h.stream_offset + h.stream_length, "the stream"});
    for (const auto& a : areas) {
        if (a.begin % kPage != 0) return Error(fmt::format("saved guest: {} does not start on a page", a.what));
        if (a.begin < kFileHeaderSize) return Error(fmt::format("saved guest: {} overlaps the header", a.what));
    }
    std::sort(areas.begin(), areas.end(), [](const Area& x, const Area& y) { return x.begin < y.begin; });
    for (size_t i = 1; i < areas.size(); ++i) {
        if (areas[i].begin < areas[i - 1].end) {
            return Error(fmt::format("saved guest: {} overlaps {}", areas[i].what, areas[i - 1].what));
        }
    }
    return {};
}

Result<FileBlock> decode_block(ByteReader& r) {
    FileBlock b;
    uint8_t len = 0;
    if (auto s = r.get(len); !s) return s.error();
    if (len == 0 || len > 64) return Error(fmt::format("saved guest: a block name of {} bytes", len));
    b.name.resize(len);
    if (auto s = r.get_bytes({reinterpret_cast<uint8_t*>(b.name.data()), len}); !s) return s.error();
    for (uint64_t* v : {&b.guest_addr, &b.size, &b.ram_offset, &b.sums_offset})
        if (auto s = r.get(*v); !s) return s.error();
    if (b.size == 0 || b.size % kPage != 0 || b.size > kMaxFileBlock) {
        return Error(fmt::format("saved guest: block '{}' has {} bytes (whole pages, at most 64 TiB)", b.name, b.size));
    }
    if (b.ram_offset > kMaxFileBlock * 4 || b.sums_offset > kMaxFileBlock * 4) {
        return Error(fmt::format("saved guest: block '{}' lies beyond any file vmm writes", b.name));
    }
    return b;
}

}  // namespace

FileHeader file_layout(const std::vector<BlockInfo>& blocks, uint32_t vcpu_count) {
    FileHeader h;
    h.vcpu_count = vcpu_count;
    uint64_t at = kFileHeaderSize;
    for (const auto& b : blocks) {
        h.blocks.push_back({b.name, b.guest_addr, b.size, at, 0});
        at += round_up(b.size);
    }
    for (auto& b : h.blocks) {
        b.sums_offset = at;
        at += round_up(sums_bytes(b.size));
    }
    h.stream_offset = at;
    return h;
}

uint64_t file_end(const FileHeader& h) { return h.stream_offset + h.stream_length; }

Result<std::vector<uint8_t>> encode_file_header(const FileHeader& h) {
    ByteWriter w;
    w.put_bytes(kFileMagic);
    w.put(kFileVersion);
    w.put(h.page_size);
    w.put(h.vcpu_count);
    w.put(static_cast<uint32_t>(h.blocks.size()));
    for (const auto& b : h.blocks) {
        w.put(static_cast<uint8_t>(b.name.size()));
        w.put_bytes({reinterpret_cast<const uint8_t*>(b.name.data()), b.name.size()});
        for (uint64_t v : {b.guest_addr, b.size, b.ram_offset, b.sums_offset}) w.put(v);
    }
    for (uint64_t v : {h.stream_offset, h.stream_length, h.stream_sum, h.save_id, h.base_id}) w.put(v);
    w.put(static_cast<uint16_t>(h.base_path.size()));
    w.put_bytes({reinterpret_cast<const uint8_t*>(h.base_path.data()), h.base_path.size()});
    std::vector<uint8_t> out = std::move(w).take();
    if (out.size() > kSumAt) return Error(fmt::format("saved guest: a header of {} bytes does not fit its {}", out.size(), kFileHeaderSize));
    out.resize(kFileHeaderSize, 0);
    uint64_t sum = XXH3_64bits(out.data(), kSumAt);
    for (size_t i = 0; i < 8; ++i) out[kSumAt + i] = static_cast<uint8_t>(sum >> (8 * i));
    return out;
}

Result<FileHeader> decode_file_header(std::span<const uint8_t> bytes) {
    if (bytes.size() < kFileHeaderSize) {
        return Error(fmt::format("not a saved guest: {} bytes, shorter than a header ({})", bytes.size(), kFileHeaderSize));
    }
    if (!std::equal(kFileMagic.begin(), kFileMagic.end(), bytes.begin())) {
        return Error("not a saved guest (no vmm save header: a save that did not finish, or another kind of file)");
    }
    ByteReader r(bytes.subspan(kFileMagic.size(), kSumAt - kFileMagic.size()), "saved guest header");
    uint32_t version = 0, count = 0;
    if (auto s = r.get(version); !s) return s.error();
    if (version != kFileVersion) {
        return Error(fmt::format("saved guest of format version {}; this vmm reads version {}: restore it with the vmm "
                                 "release that saved it",
                                 version, kFileVersion));
    }
    ByteReader whole(bytes.subspan(kSumAt, 8), "saved guest header");
    uint64_t sum = 0;
    (void)whole.get(sum);
    if (sum != XXH3_64bits(bytes.data(), kSumAt)) return Error("saved guest: its header is damaged (its sum does not match)");
    FileHeader h;
    if (auto s = r.get(h.page_size); !s) return s.error();
    if (auto s = r.get(h.vcpu_count); !s) return s.error();
    if (auto s = r.get(count); !s) return s.error();
    if (h.page_size != kPage) return Error(fmt::format("saved guest: page size {} is not {}", h.page_size, kPage));
    if (count == 0 || count > kMaxBlocks) return Error(fmt::format("saved guest: {} RAM blocks (1 to {})", count, kMaxBlocks));
    for (uint32_t i = 0; i < count; ++i) {
        auto b = decode_block(r);
        if (!b) return b.error();
        h.blocks.push_back(std::move(*b));
    }
    for (uint64_t* v : {&h.stream_offset, &h.stream_length, &h.stream_sum, &h.save_id, &h.base_id})
        if (auto s = r.get(*v); !s) return s.error();
    uint16_t path_length = 0;
    if (auto s = r.get(path_length); !s) return s.error();
    if (path_length > kMaxBasePath) return Error(fmt::format("saved guest: a base path of {} bytes", path_length));
    h.base_path.resize(path_length);
    if (auto s = r.get_bytes({reinterpret_cast<uint8_t*>(h.base_path.data()), path_length}); !s) return s.error();
    if (h.save_id == 0) return Error("saved guest: no save id");
    if ((h.base_id == 0) != h.base_path.empty() || h.base_id == h.save_id) {
        return Error("saved guest: its base is named by half (an id without a path, or a path without an id) or is itself");
    }
    if (h.stream_length == 0 || h.stream_length > kMaxFileStream || h.stream_offset > kMaxFileBlock * 4) {
        return Error(fmt::format("saved guest: a stream of {} bytes at {} (1 byte to {} MiB)", h.stream_length,
                                 h.stream_offset, kMaxFileStream >> 20));
    }
    if (auto s = check_areas(h); !s) return s.error();
    return h;
}

uint64_t page_slot(const uint8_t* page) {
    if (is_zero_page(page)) return 0;
    uint64_t sum = XXH3_64bits(page, kPage);
    if (sum == 0) return 1;
    return sum == kSlotInBase ? kSlotInBase - 1 : sum;
}

}  // namespace vmm::migration

#include "vmm/migration/wire/stream_format.h"

#include <fmt/format.h>

#include <algorithm>

#include "vmm/common/bytes.h"
#include "vmm/common/units.h"

namespace vmm::migration {

std::vector<uint8_t> encode_header(const StreamHeader& h) {
    ByteWriter body;
    body.put(h.page_size);
    body.put(h.vcpu_count);
    body.put(static_cast<uint32_t>(h.blocks.size()));
    for (const auto& b : h.blocks) {
        body.put(static_cast<uint8_t>(b.name.size()));
        body.put_bytes({reinterpret_cast<const uint8_t*>(b.name.data()), b.name.size()});
        body.put(b.guest_addr);
        body.put(b.size);
    }
    body.put(static_cast<uint8_t>(h.ram_mode));
    body.put(h.features);
    ByteWriter out;
    out.put_bytes(kMagic);
    out.put(kVersion);
    out.put(static_cast<uint32_t>(body.bytes().size()));
    out.put_bytes(body.bytes());
    return std::move(out).take();
}

Result<StreamHeader> decode_header_body(std::span<const uint8_t> body) {
    ByteReader r(body, "migration header");
    StreamHeader h;
    uint32_t count = 0;
    if (auto s = r.get(h.page_size); !s) return s.error();
    if (auto s = r.get(h.vcpu_count); !s) return s.error();
    if (auto s = r.get(count); !s) return s.error();
    if (h.page_size != 4096) return Error(fmt::format("migration header: page size {} is not 4096", h.page_size));
    if (count == 0 || count > kMaxBlocks) return Error(fmt::format("migration header: {} RAM blocks (1 to {} allowed)", count, kMaxBlocks));
    for (uint32_t i = 0; i < count; ++i) {
        BlockInfo b;
        uint8_t len = 0;
        if (auto s = r.get(len); !s) return s.error();
        if (len == 0 || len > 64) return Error(fmt::format("migration header: block name of {} bytes", len));
        b.name.resize(len);
        if (auto s = r.get_bytes({reinterpret_cast<uint8_t*>(b.name.data()), len}); !s) return s.error();
        if (auto s = r.get(b.guest_addr); !s) return s.error();
        if (auto s = r.get(b.size); !s) return s.error();
        h.blocks.push_back(std::move(b));
    }
    uint8_t mode = 0;
    if (auto s = r.get(mode); !s) return s.error();
    if (mode > 1) return Error(fmt::format("migration header: unknown RAM mode {}", mode));
    h.ram_mode = static_cast<RamMode>(mode);
    if (auto s = r.get(h.features); !s) return s.error();
    if ((h.features & ~kKnownFeatures) != 0) {
        return Error(fmt::format("migration header: unknown feature bits {:#x}: use the same vmm release on both sides",
                                 h.features & ~kKnownFeatures));
    }
    uint32_t sums = h.features & (kFeatureRoundSums | kFeatureChannelSums);
    bool channel = h.ram_mode == RamMode::transport_channel;
    if (sums != 0 && ((h.features & kFeatureVerifyRam) == 0 || !channel || sums == (kFeatureRoundSums | kFeatureChannelSums))) {
        return Error(fmt::format("migration header: feature bits {:#x} contradict each other (a RAM channel's sums go one "
                                 "way, and only under verify-ram)",
                                 h.features));
    }
    if ((h.features & kFeatureRoundLanded) != 0 && !channel) {
        return Error("migration header: rounds landed on a RAM channel, but the RAM comes inline");
    }
    if ((h.features & kFeaturePostcopyResume) != 0 && (h.features & kFeaturePostcopy) == 0) {
        return Error("migration header: a postcopy resumption without postcopy-ram");
    }
    if ((h.features & kFeaturePrecopyResume) != 0 && (h.features & kFeatureResumable) == 0) {
        return Error("migration header: a precopy resumption from a source that did not say it resumes");
    }
    if ((h.features & (kFeatureResumable | kFeaturePrecopyResume)) != 0 && (h.features & kFeaturePostcopyResume) != 0) {
        return Error("migration header: a precopy's resumption and a postcopy's at once");
    }
    if (auto s = r.expect_end(); !s) return s.error();
    return h;
}

Status decode_magic(std::span<const uint8_t> magic) {
    if (magic.size() != kMagic.size()) return Error("the migration stream ended early (truncated)");
    if (std::equal(magic.begin(), magic.end(), kMagic.begin())) return {};
    // QEMU's stream starts with QEMU_VM_FILE_MAGIC ("QEVM") and a big-endian version (3).
    if (magic[0] == 'Q' && magic[1] == 'E' && magic[2] == 'V' && magic[3] == 'M') {
        uint32_t version = (uint32_t{magic[4]} << 24) | (uint32_t{magic[5]} << 16) | (uint32_t{magic[6]} << 8) | magic[7];
        return Error(fmt::format("the source sent QEMU's migration stream (magic QEVM, version {}): vmm cannot load a "
                                 "QEMU guest; migrate it to a QEMU destination",
                                 version));
    }
    return Error("this is not a vmm migration stream (bad magic): is the source a vmm of this project?");
}

Result<uint32_t> decode_header_prefix(std::span<const uint8_t> prefix) {
    ByteReader r(prefix, "migration stream");
    uint32_t version = 0, length = 0;
    if (auto s = r.get(version); !s) return s.error();
    if (version != kVersion) {
        return Error(fmt::format("migration stream version {} is not supported (this vmm speaks version {}): use the "
                                 "same vmm release on both sides",
                                 version, kVersion));
    }
    if (auto s = r.get(length); !s) return s.error();
    if (length > kMaxHeaderBody) return Error(fmt::format("migration header of {} bytes exceeds the {} byte limit", length, kMaxHeaderBody));
    return length;
}

Result<StreamHeader> decode_header(std::span<const uint8_t> bytes) {
    if (bytes.size() < kMagic.size() + kHeaderPrefix) return Error("the migration stream ended early (truncated)");
    if (auto s = decode_magic(bytes.first(kMagic.size())); !s) return s.error();
    auto length = decode_header_prefix(bytes.subspan(kMagic.size(), kHeaderPrefix));
    if (!length) return length.error();
    auto body = bytes.subspan(kMagic.size() + kHeaderPrefix);
    if (body.size() < *length) return Error("the migration stream ended early (truncated)");
    return decode_header_body(body.first(*length));
}

std::vector<uint8_t> encode_record(const Record& r) {
    ByteWriter w;
    w.put(static_cast<uint8_t>(r.type));
    switch (r.type) {
        case RecordType::round_begin:
        case RecordType::round_end: w.put(r.round); break;
        case RecordType::pages:
        case RecordType::pages_summed:
            w.put(r.block);
            w.put(r.offset);
            w.put(static_cast<uint32_t>(r.length));
            break;
        case RecordType::sums:
            w.put(r.block);
            w.put(r.offset);
            w.put(static_cast<uint32_t>(r.length));
            break;
        case RecordType::zero:
        case RecordType::populate:
        case RecordType::discard:
            w.put(r.block);
            w.put(r.offset);
            w.put(r.length);
            break;
        case RecordType::state: w.put(static_cast<uint32_t>(r.length)); break;
        case RecordType::session:
            w.put(r.session);
            w.put(r.window_ms);
            w.put(r.round);
            break;
        case RecordType::end:
        case RecordType::postcopy: break;
    }
    return std::move(w).take();
}

Status check_page_range(uint32_t block, uint64_t offset, uint64_t length, const std::vector<BlockInfo>& blocks,
                        uint32_t page_size) {
    if (block >= blocks.size()) return Error(fmt::format("migration stream: RAM block index {} (there are {})", block, blocks.size()));
    const BlockInfo& b = blocks[block];
    if (offset % page_size != 0 || length % page_size != 0 || length == 0) {
        return Error(fmt::format("migration stream: range {:#x}+{:#x} in '{}' is not whole pages", offset, length, b.name));
    }
    if (offset >= b.size || length > b.size - offset) {
        return Error(fmt::format("migration stream: range {:#x}+{:#x} lies outside RAM block '{}' ({})", offset, length,
                                 b.name, format_size(b.size)));
    }
    return {};
}

static Status check_range(const Record& r, const std::vector<BlockInfo>& blocks, uint32_t page_size) {
    return check_page_range(r.block, r.offset, r.length, blocks, page_size);
}

Result<size_t> record_body_size(uint8_t type) {
    switch (type) {
        case 0x01:
        case 0x04: return size_t{4};   // round
        case 0x02:
        case 0x08:
        case 0x09: return size_t{16};  // block, offset, u32 length
        case 0x03:
        case 0x07:
        case 0x0A: return size_t{20};  // block, offset, u64 length
        case 0x05: return size_t{4};   // length
        case 0x0C: return size_t{16};  // session id, window, round
        case 0x06:
        case 0x0B: return size_t{0};
        default: return Error(fmt::format("migration stream: unknown record type {:#04x}", type));
    }
}

Result<Record> decode_record(uint8_t type, std::span<const uint8_t> body, const std::vector<BlockInfo>& blocks,
                             uint32_t page_size) {
    auto size = record_body_size(type);
    if (!size) return size.error();
    if (body.size() != *size) return Error("the migration stream ended early (truncated)");
    ByteReader in(body, "migration stream");
    Record r;
    r.type = static_cast<RecordType>(type);
    uint32_t len = 0;
    switch (r.type) {
        case RecordType::round_begin:
        case RecordType::round_end:
            if (auto s = in.get(r.round); !s) return s.error();
            return r;
        case RecordType::pages:
        case RecordType::pages_summed:
        case RecordType::sums: {
            if (auto s = in.get(r.block); !s) return s.error();
            if (auto s = in.get(r.offset); !s) return s.error();
            if (auto s = in.get(len); !s) return s.error();
            r.length = len;
            if (r.type != RecordType::sums && len > kMaxPagesRecord) {
                return Error(fmt::format("migration stream: PAGES record of {} bytes exceeds {}", len, kMaxPagesRecord));
            }
            // SUMS: length is the range the sums cover, at most kMaxSumsRecord pages
            if (r.type == RecordType::sums && len > kMaxSumsRecord * page_size) {
                return Error(fmt::format("migration stream: SUMS over {} bytes exceeds {} pages", len, kMaxSumsRecord));
            }
            if (auto s = check_range(r, blocks, page_size); !s) return s.error();
            return r;
        }
        case RecordType::zero:
        case RecordType::populate:
        case RecordType::discard:
            if (auto s = in.get(r.block); !s) return s.error();
            if (auto s = in.get(r.offset); !s) return s.error();
            if (auto s = in.get(r.length); !s) return s.error();
            if (auto s = check_range(r, blocks, page_size); !s) return s.error();
            return r;
        case RecordType::state:
            if (auto s = in.get(len); !s) return s.error();
            if (len > kMaxStateRecord) return Error(fmt::format("migration stream: STATE record of {} bytes exceeds {}", len, kMaxStateRecord));
            r.length = len;
            return r;
        case RecordType::session:
            for (Status s : {in.get(r.session), in.get(r.window_ms), in.get(r.round)})
                if (!s) return s.error();
            return r;
        case RecordType::end:
        case RecordType::postcopy: return r;
    }
    return Error(fmt::format("migration stream: unknown record type {:#04x}", type));
}

std::vector<uint8_t> encode_reply(ReplyType t, const std::string& reason) {
    if (t == ReplyType::header_ok) return encode_header_ok(0);
    ByteWriter w;
    w.put(static_cast<uint8_t>(t));
    if (t == ReplyType::refused) w.put_string(reason.substr(0, kMaxReason));
    return std::move(w).take();
}

std::vector<uint8_t> encode_header_ok(uint32_t handover_us) {
    ByteWriter w;
    w.put(static_cast<uint8_t>(ReplyType::header_ok));
    w.put(handover_us);
    return std::move(w).take();
}

Result<size_t> reply_body_size(uint8_t type) {
    if (type < 0x80 || type > 0x87) return Error(fmt::format("migration peer sent an unknown reply {:#04x}", type));
    auto t = static_cast<ReplyType>(type);
    return t == ReplyType::header_ok || t == ReplyType::refused ? size_t{4} : size_t{0};
}

Result<ReplyHead> decode_reply(uint8_t type, std::span<const uint8_t> body) {
    auto size = reply_body_size(type);
    if (!size) return size.error();
    if (body.size() != *size) return Error("the migration stream ended early (truncated)");
    ByteReader in(body, "migration reply");
    ReplyHead h;
    h.reply.type = static_cast<ReplyType>(type);
    if (h.reply.type == ReplyType::header_ok) {
        if (auto s = in.get(h.reply.handover_us); !s) return s.error();
    } else if (h.reply.type == ReplyType::refused) {
        if (auto s = in.get(h.reason_length); !s) return s.error();
        if (h.reason_length > kMaxReason) return Error("migration peer sent an over-long refusal");
    }
    return h;
}

Status check_compatible(const StreamHeader& src, const StreamHeader& local) {
    if (src.vcpu_count != local.vcpu_count) {
        return Error(fmt::format("the source has {} vCPUs, this destination {}: start it with --smp {}", src.vcpu_count,
                                 local.vcpu_count, src.vcpu_count));
    }
    if (src.blocks.size() != local.blocks.size()) {
        return Error(fmt::format("the source has {} RAM blocks, this destination {}: use the same RAM layout",
                                 src.blocks.size(), local.blocks.size()));
    }
    for (size_t i = 0; i < src.blocks.size(); ++i) {
        const auto& a = src.blocks[i];
        const auto& b = local.blocks[i];
        if (a.name != b.name) return Error(fmt::format("RAM block {} is '{}' on the source but '{}' here", i, a.name, b.name));
        if (a.size != b.size || a.guest_addr != b.guest_addr) {
            return Error(fmt::format("RAM block '{}' is {} at {:#x} on the source but {} at {:#x} here: start the "
                                     "destination with the same memory size (-m {}M)",
                                     a.name, format_size(a.size), a.guest_addr, format_size(b.size), b.guest_addr,
                                     a.size >> 20));
        }
    }
    return {};
}

}  // namespace vmm::migration

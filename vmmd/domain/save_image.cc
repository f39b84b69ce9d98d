#include "vmmd/domain/save_image.h"

#include <fmt/format.h>

#include <algorithm>

#include "vmm/common/bytes.h"

namespace vmmd {

using vmm::Error;

uint64_t save_image_offset(uint32_t xml_length) { return (kSaveImagePrefix + xml_length + 4095) / 4096 * 4096; }

std::vector<uint8_t> encode_save_image_header(const SaveImageHeader& h) {
    vmm::ByteWriter w;
    w.put_bytes(kSaveImageMagic);
    w.put(kSaveImageVersion);
    w.put(uint32_t{h.running ? 1u : 0u});
    w.put(static_cast<uint32_t>(h.xml.size()));
    w.put_bytes({reinterpret_cast<const uint8_t*>(h.xml.data()), h.xml.size()});
    std::vector<uint8_t> out = std::move(w).take();
    out.resize(save_image_offset(static_cast<uint32_t>(h.xml.size())), 0);
    return out;
}

vmm::Result<uint32_t> decode_save_image_prefix(std::span<const uint8_t> prefix) {
    if (prefix.size() < kSaveImagePrefix || !std::equal(kSaveImageMagic.begin(), kSaveImageMagic.end(), prefix.begin())) {
        return Error("not a domain saved by vmmd (no vmmd save header)");
    }
    vmm::ByteReader r(prefix.subspan(kSaveImageMagic.size(), kSaveImagePrefix - kSaveImageMagic.size()), "save image header");
    uint32_t version = 0, flags = 0, length = 0;
    if (auto s = r.get(version); !s) return s.error();
    if (auto s = r.get(flags); !s) return s.error();
    if (auto s = r.get(length); !s) return s.error();
    if (version != kSaveImageVersion) {
        return Error(fmt::format("a save image of version {}; this vmmd reads version {}", version, kSaveImageVersion));
    }
    if ((flags & ~1u) != 0) return Error(fmt::format("save image header: unknown flags {:#x}", flags & ~1u));
    if (length == 0 || length > kMaxSaveImageXml) {
        return Error(fmt::format("save image header: a definition of {} bytes (1 to {})", length, kMaxSaveImageXml));
    }
    return length;
}

vmm::Result<SaveImageHeader> decode_save_image_header(std::span<const uint8_t> bytes) {
    auto length = decode_save_image_prefix(bytes.first(std::min(bytes.size(), kSaveImagePrefix)));
    if (!length) return length.error();
    if (bytes.size() < kSaveImagePrefix + *length) {
        return Error(fmt::format("save image header: its definition ends {} bytes early (truncated?)",
                                 kSaveImagePrefix + *length - bytes.size()));
    }
    SaveImageHeader h;
    h.running = (bytes[12] & 1) != 0;  // the flags' low byte, little-endian, after magic and version
    h.xml.assign(reinterpret_cast<const char*>(bytes.data() + kSaveImagePrefix), *length);
    return h;
}

}  // namespace vmmd

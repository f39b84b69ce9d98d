// A domain saved by vmmd (virsh save, managedsave): vmmd's own header, which keeps what restoring
// needs besides the guest (its definition, and whether it was running), then vmm's saved guest
// (migrate file:PATH,offset=N: vmm/migration/wire/file_format.h) from the first page after it,
// as libvirt's QEMU driver puts its header before QEMU's stream. Pure: bytes in, values out.
//
//   magic "VMMDSAV\n", version (u32), flags (u32: bit 0 running), XML length (u32), the XML,
//   zeros up to the next multiple of 4096, where vmm's save starts.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vmm/common/result.h"

namespace vmmd {

constexpr std::array<uint8_t, 8> kSaveImageMagic = {'V', 'M', 'M', 'D', 'S', 'A', 'V', '\n'};
constexpr uint32_t kSaveImageVersion = 1;
constexpr size_t kSaveImagePrefix = 20;           // magic, version, flags, XML length
constexpr uint32_t kMaxSaveImageXml = 1u << 20;  // a domain definition, far above any real one

struct SaveImageHeader {
    std::string xml;       // the definition the domain ran with
    bool running = false;  // whether to run it once restored (virsh save --running/--paused change it)
    bool operator==(const SaveImageHeader&) const = default;
};

// The header, padded to where vmm's save starts (a multiple of 4096).
std::vector<uint8_t> encode_save_image_header(const SaveImageHeader& h);
// The XML's length from the first kSaveImagePrefix bytes: checks magic, version and bounds.
vmm::Result<uint32_t> decode_save_image_prefix(std::span<const uint8_t> prefix);
// A whole header (at least its prefix and XML); the offset of vmm's save is save_image_offset().
vmm::Result<SaveImageHeader> decode_save_image_header(std::span<const uint8_t> bytes);
uint64_t save_image_offset(uint32_t xml_length);

}  // namespace vmmd

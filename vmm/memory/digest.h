// RAM digests: a 64-bit XXH3 of each block's bytes, so two VMs' memory can be compared from
// the host side without reading it from the guest.
#pragma once

#include <cstdint>
#include <string>

#include "vmm/memory/ram_block.h"

namespace vmm::memory {

uint64_t block_digest(const RamBlock& block);
std::string digest_hex(uint64_t digest);

}  // namespace vmm::memory

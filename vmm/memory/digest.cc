#include "vmm/memory/digest.h"

#include <fmt/format.h>
#include <xxhash.h>

namespace vmm::memory {

uint64_t block_digest(const RamBlock& block) { return XXH3_64bits(block.host(), block.size()); }

std::string digest_hex(uint64_t digest) { return fmt::format("{:016x}", digest); }

}  // namespace vmm::memory

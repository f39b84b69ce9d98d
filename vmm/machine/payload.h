// Payload: a guest program as an ELF64 executable whose PT_LOAD segments are copied into guest
// RAM. Payloads are found by name (built by the project) or by path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/common/search_path.h"
#include "vmm/memory/guest_memory.h"

namespace vmm::machine {

struct LoadedPayload {
    uint64_t entry = 0;
    uint64_t image_start = 0;  // lowest loaded guest address
    uint64_t image_end = 0;    // one past the highest (bss included)
};

// A name without '/' is looked up as NAME.elf in the payload directories: $VMM_GUEST_DIR, then
// <dir of the vmm binary>/../guest, then the installed share/vmm/guest.
Result<std::string> resolve_payload(const std::string& name_or_path);
SearchPath payload_search_path();

// Parses and checks the ELF image (x86-64, executable, segments inside RAM, above 1 MiB).
Result<LoadedPayload> load_payload(const std::vector<uint8_t>& elf, const memory::GuestMemory& mem);
Result<std::vector<uint8_t>> read_file(const std::string& path);

}  // namespace vmm::machine

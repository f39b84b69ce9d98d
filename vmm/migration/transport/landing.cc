#include "vmm/migration/transport/landing.h"

#include <sys/mman.h>

#include <cstring>

#include "vmm/migration/transport/stream_io.h"

namespace vmm::migration {

Status receive_pages(stream::ByteStream& in, uint8_t* dst, uint64_t length, uint64_t populated) {
#ifdef MADV_POPULATE_WRITE
    // Populate the whole record's pages in one call instead of one page fault per 4 KiB while
    // the socket data is copied in (advisory: older kernels say EINVAL and fault as before).
    if (populated < length) ::madvise(dst + populated, length - populated, MADV_POPULATE_WRITE);
#endif
    return in.read_exact({dst, length});
}

void zero_pages(uint8_t* dst, uint64_t length) {
    // Private anonymous memory reads back as zero after MADV_DONTNEED, and stays unpopulated.
    if (::madvise(dst, length, MADV_DONTNEED) != 0) std::memset(dst, 0, length);
}

Status land_pages(stream::ByteStream& in, const Record& r, uint8_t* dst, RamVerifier* verifier, uint64_t populated) {
    bool summed = r.type == RecordType::pages_summed;
    if (verifier != nullptr && !summed) {
        return Error("migration stream: PAGES without a checksum, but the source announced verify-ram");
    }
    if (verifier == nullptr && summed) return Error("migration stream: PAGES_SUMMED, but the source did not announce verify-ram");
    std::vector<uint64_t> sums;
    if (summed) {
        if (auto s = read_page_sums(in, r.length, sums); !s) return s;
    }
    if (auto s = receive_pages(in, dst, r.length, populated); !s) return s;
    if (verifier != nullptr) verifier->check(r.block, r.offset, {dst, r.length}, sums);
    return {};
}

void land_zero(const Record& r, uint8_t* dst, RamVerifier* verifier) {
    zero_pages(dst, r.length);
    if (verifier != nullptr) verifier->replaced(r.block, r.offset, r.length);
}

}  // namespace vmm::migration

// Pages placed in the destination's guest RAM as they arrive, by whichever transport carries
// them: the main stream's loader (precopy/ram_loader.h) and multifd's lanes alike. Every range
// was checked against the RAM blocks (wire/stream_format.h) before it gets here.
#pragma once

#include <cstdint>

#include "vmm/common/result.h"
#include "vmm/migration/transport/ram_verifier.h"
#include "vmm/stream/byte_stream.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

// Reads `length` bytes of pages from `in` straight into guest RAM at `dst` (populating the
// range first, one call instead of a fault per page; the first `populated` bytes are already).
Status receive_pages(stream::ByteStream& in, uint8_t* dst, uint64_t length, uint64_t populated = 0);
// Makes guest RAM [dst, dst + length) read as zero, leaving it unpopulated where possible.
void zero_pages(uint8_t* dst, uint64_t length);

// One PAGES or PAGES_SUMMED record's data (the record already checked against the blocks) into
// guest RAM at `dst`; with a verifier (verify-ram announced) only PAGES_SUMMED is accepted, and
// what landed is checked against its sum; without one, only PAGES.
Status land_pages(stream::ByteStream& in, const Record& r, uint8_t* dst, RamVerifier* verifier, uint64_t populated = 0);
// A ZERO record's range; it settles pages a verifier holds as owed.
void land_zero(const Record& r, uint8_t* dst, RamVerifier* verifier);

}  // namespace vmm::migration

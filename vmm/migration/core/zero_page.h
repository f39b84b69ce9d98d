// Whether a guest page is all zero: both phases send such a page as a ZERO marker, not its data.
#pragma once

#include <cstdint>

namespace vmm::migration {

// True when every byte of the 4 KiB page at `p` is zero.
bool is_zero_page(const uint8_t* p);

}  // namespace vmm::migration

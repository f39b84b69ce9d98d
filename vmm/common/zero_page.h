// Whether a guest page is all zero: both migration phases send such a page as a ZERO marker, not
// its data, and a saved guest keeps it as a hole (migration/wire/file_format.cc).
#pragma once

#include <cstddef>
#include <cstdint>

namespace vmm {

inline constexpr size_t kZeroCheckPageSize = 4096;  // a guest page (memory::kPageSize)

// True when every byte of the 4 KiB page at `p` is zero.
bool is_zero_page(const uint8_t* p);

}  // namespace vmm

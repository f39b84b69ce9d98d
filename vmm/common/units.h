// Sizes as users type them ("256M", "4g", "4096") and as we print them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "vmm/common/result.h"

namespace vmm {

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;
constexpr uint64_t GiB = 1024 * MiB;

// Binary suffixes k/m/g/t (either case, optional trailing "b"/"ib"); a bare number is bytes.
Result<uint64_t> parse_size(std::string_view text);

// Plain unsigned integer, decimal or 0x-hex.
Result<uint64_t> parse_uint(std::string_view text);

// "256 MiB", "1.5 GiB", "512 B".
std::string format_size(uint64_t bytes);

}  // namespace vmm

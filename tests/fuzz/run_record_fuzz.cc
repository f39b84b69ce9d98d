// libFuzzer target for the run records a restarted vmmd reads back (<state>/run/<uuid>.json):
// any crash or sanitizer report is a bug, and so is a record that decodes but does not encode
// back to a record that decodes to the same values.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "vmmd/runtime/run_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto r = vmmd::decode_run_record(std::string_view(reinterpret_cast<const char*>(data), size));
    if (!r) return 0;
    auto again = vmmd::decode_run_record(vmmd::encode_run_record(*r));
    if (!again || !(*again == *r)) __builtin_trap();
    return 0;
}

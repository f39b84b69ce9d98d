#include "vmm/common/zero_page.h"

#include <cstring>

namespace vmm {

bool is_zero_page(const uint8_t* p) {
    uint64_t acc = 0;
    for (size_t i = 0; i < kZeroCheckPageSize; i += 64) {
        uint64_t w[8];
        std::memcpy(w, p + i, sizeof(w));
        acc |= w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7];
        if (acc != 0) return false;
    }
    return true;
}

}  // namespace vmm

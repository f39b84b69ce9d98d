#include "vmm/common/zero_page.h"

#include <gtest/gtest.h>

#include <vector>

namespace vmm {

TEST(ZeroPage, EveryByteCounts) {
    std::vector<uint8_t> page(kZeroCheckPageSize, 0);
    EXPECT_TRUE(is_zero_page(page.data()));
    for (size_t at : {size_t{0}, size_t{63}, size_t{64}, size_t{2048}, kZeroCheckPageSize - 1}) {
        page[at] = 0x80;
        EXPECT_FALSE(is_zero_page(page.data())) << "a byte set at " << at;
        page[at] = 0;
    }
    EXPECT_TRUE(is_zero_page(page.data()));
}

}  // namespace vmm

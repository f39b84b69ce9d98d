// verify-ram's page sums: XXH3-64 without a key, HMAC-SHA256 (first 8 bytes, little-endian)
// with one. The keyed values are known answers computed apart from GnuTLS (Python's hmac).
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "vmm/migration/wire/page_sums.h"

namespace vmm::migration {
namespace {

PageSumKey counting_key() {
    PageSumKey k{};
    std::iota(k.begin(), k.end(), uint8_t{0});
    return k;
}

TEST(PageSummer, WithoutAKeyItIsXxh3) {
    std::vector<uint8_t> page(4096, 7);
    EXPECT_FALSE(PageSummer().keyed());
    EXPECT_EQ(PageSummer()(page.data()), page_checksum(page.data()));
}

TEST(PageSummer, WithAKeyItIsHmacSha256) {
    std::vector<uint8_t> zero(4096, 0), counting(4096);
    for (size_t i = 0; i < counting.size(); ++i) counting[i] = static_cast<uint8_t>(i % 251);
    PageSummer keyed(counting_key());
    EXPECT_TRUE(keyed.keyed());
    EXPECT_EQ(keyed(zero.data()), 0xea56bbadbe3a1a8eull);
    EXPECT_EQ(keyed(counting.data()), 0xd57ae5a4e8824ebbull);
}

TEST(PageSummer, AnotherKeyGivesAnotherSum) {
    std::vector<uint8_t> page(4096, 0);
    PageSumKey other = counting_key();
    other[31] ^= 1;
    EXPECT_NE(PageSummer(counting_key())(page.data()), PageSummer(other)(page.data()));
    EXPECT_NE(PageSummer(counting_key())(page.data()), page_checksum(page.data()));
}

}  // namespace
}  // namespace vmm::migration

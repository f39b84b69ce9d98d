// verify-ram's page sums: XXH3-64 without a key, UMAC-64 (RFC 4418) with one. The keyed values
// are RFC 4418's own test vectors (its key "abcdefghijklmnop", nonce "bcdefghi"), read as
// little-endian u64s.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "vmm/migration/wire/page_sums.h"

namespace vmm::migration {
namespace {

PageSumKey rfc4418_key() {
    PageSumKey k{};
    std::memcpy(k.data(), "abcdefghijklmnop", 16);
    std::memcpy(k.data() + 16, "bcdefghi", 8);
    return k;
}

uint64_t of(const std::string& text) {
    return keyed_sum(rfc4418_key(), {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

TEST(PageSummer, WithoutAKeyItIsXxh3) {
    std::vector<uint8_t> page(4096, 7);
    EXPECT_FALSE(PageSummer().keyed());
    EXPECT_EQ(PageSummer()(page.data()), page_checksum(page.data()));
}

TEST(PageSummer, WithAKeyItIsUmac64AsRfc4418Computes) {
    EXPECT_EQ(of(""), 0xE10B9026AD5F156Eull);                  // RFC 4418: 6E155FAD26900BE1
    EXPECT_EQ(of("aaa"), 0x0401222F54CBB544ull);               // 44B5CB542F220104
    EXPECT_EQ(of(std::string(1024, 'a')), 0xD98B11605D2FBF26ull);  // 26BF2F5D60118BD9
    std::vector<uint8_t> page(4096, 'a');
    PageSummer keyed(rfc4418_key());
    EXPECT_TRUE(keyed.keyed());
    EXPECT_EQ(keyed(page.data()), of(std::string(4096, 'a')));
    EXPECT_EQ(keyed(page.data()), keyed(page.data())) << "the same page, the same sum, page after page";
}

TEST(PageSummer, AnotherKeyOrNonceGivesAnotherSum) {
    std::vector<uint8_t> page(4096, 0);
    PageSumKey key = rfc4418_key(), other_key = key, other_nonce = key;
    other_key[0] ^= 1;
    other_nonce[16] ^= 1;
    EXPECT_NE(PageSummer(key)(page.data()), PageSummer(other_key)(page.data()));
    EXPECT_NE(PageSummer(key)(page.data()), PageSummer(other_nonce)(page.data()));
    EXPECT_NE(PageSummer(key)(page.data()), page_checksum(page.data()));
    page[4095] = 1;
    EXPECT_NE(PageSummer(key)(page.data()), PageSummer(key)(std::vector<uint8_t>(4096, 0).data()));
}

}  // namespace
}  // namespace vmm::migration

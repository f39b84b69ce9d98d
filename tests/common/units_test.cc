#include "vmm/common/units.h"

#include <gtest/gtest.h>

namespace vmm {

TEST(ParseSize, AcceptsBinarySuffixesInEitherCase) {
    EXPECT_EQ(*parse_size("4096"), 4096u);
    EXPECT_EQ(*parse_size("256M"), 256 * MiB);
    EXPECT_EQ(*parse_size("256m"), 256 * MiB);
    EXPECT_EQ(*parse_size("4g"), 4 * GiB);
    EXPECT_EQ(*parse_size("40G"), 40 * GiB);
    EXPECT_EQ(*parse_size("512k"), 512 * KiB);
    EXPECT_EQ(*parse_size("1MiB"), MiB);
    EXPECT_EQ(*parse_size("2MB"), 2 * MiB);
    EXPECT_EQ(*parse_size("1t"), 1024 * GiB);
}

TEST(ParseSize, RejectsGarbageWithAnActionableMessage) {
    for (const char* bad : {"", "M", "12x", "1.5G", "-4", "0x10M", "4 G"}) {
        auto r = parse_size(bad);
        ASSERT_FALSE(r) << bad;
        EXPECT_NE(r.error().message().find("256M"), std::string::npos) << r.error().message();
    }
}

TEST(ParseSize, RejectsOverflow) {
    EXPECT_FALSE(parse_size("18446744073709551615k"));
    EXPECT_FALSE(parse_size("99999999999999999999"));
}

TEST(ParseUint, DecimalAndHex) {
    EXPECT_EQ(*parse_uint("0x400000"), 0x400000u);
    EXPECT_EQ(*parse_uint("17"), 17u);
    EXPECT_FALSE(parse_uint("0x"));
    EXPECT_FALSE(parse_uint("12a"));
}

TEST(FormatSize, PicksTheLargestExactOrRoundedUnit) {
    EXPECT_EQ(format_size(512), "512 B");
    EXPECT_EQ(format_size(256 * MiB), "256 MiB");
    EXPECT_EQ(format_size(3 * GiB / 2), "1.5 GiB");
}

}  // namespace vmm

#include "vmm/common/bytes.h"

#include <gtest/gtest.h>

namespace vmm {

TEST(Bytes, IntegersAreLittleEndianAndRoundTrip) {
    ByteWriter w;
    w.put(uint8_t{0xab});
    w.put(uint16_t{0x1234});
    w.put(uint32_t{0xdeadbeef});
    w.put(uint64_t{0x0102030405060708});
    w.put(int32_t{-2});
    const auto& b = w.bytes();
    ASSERT_EQ(b.size(), 1u + 2 + 4 + 8 + 4);
    EXPECT_EQ(b[1], 0x34);
    EXPECT_EQ(b[2], 0x12);
    EXPECT_EQ(b[7], 0x08);
    ByteReader r(b, "test");
    uint8_t u8 = 0;
    uint16_t u16 = 0;
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    int32_t i32 = 0;
    ASSERT_TRUE(r.get(u8));
    ASSERT_TRUE(r.get(u16));
    ASSERT_TRUE(r.get(u32));
    ASSERT_TRUE(r.get(u64));
    ASSERT_TRUE(r.get(i32));
    EXPECT_EQ(u8, 0xab);
    EXPECT_EQ(u16, 0x1234);
    EXPECT_EQ(u32, 0xdeadbeefu);
    EXPECT_EQ(u64, 0x0102030405060708u);
    EXPECT_EQ(i32, -2);
    EXPECT_TRUE(r.expect_end());
}

TEST(Bytes, TruncatedInputSaysWhereAndHowMuch) {
    std::vector<uint8_t> three{1, 2, 3};
    ByteReader r(three, "device 'x'");
    uint32_t v = 0;
    auto s = r.get(v);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().message(), "device 'x': truncated at byte 0 (needs 4 more bytes, 3 left)");
}

TEST(Bytes, BlobLongerThanItsLimitIsRefusedBeforeAllocation) {
    ByteWriter w;
    w.put(uint32_t{0xffffffff});
    ByteReader r(w.bytes(), "blob");
    std::vector<uint8_t> out;
    auto s = r.get_blob(out, 1024);
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message().find("exceeds the limit of 1024"), std::string::npos);
    EXPECT_TRUE(out.empty());
}

TEST(Bytes, StringsRoundTripAndTrailingBytesAreAnError) {
    ByteWriter w;
    w.put_string("serial0");
    w.put(uint8_t{9});
    ByteReader r(w.bytes(), "s");
    std::string s;
    ASSERT_TRUE(r.get_string(s, 64));
    EXPECT_EQ(s, "serial0");
    EXPECT_FALSE(r.expect_end());
}

}  // namespace vmm

#include "vmmd/xdr/xdr.h"

#include <gtest/gtest.h>

#include <limits>

namespace vmmd::xdr {
namespace {

TEST(Xdr, EncodesAsRfc4506Says) {
    Writer w;
    w.u32(0x01020304);
    w.i32(-2);
    w.u64(0x1122334455667788ull);
    w.string("abcde");  // 5 bytes + 3 of padding
    w.optional_string(std::nullopt);
    w.optional_string(std::string("x"));
    std::vector<uint8_t> want = {1, 2, 3, 4, 0xff, 0xff, 0xff, 0xfe, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
                                 0, 0, 0, 5, 'a', 'b', 'c', 'd', 'e', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1,
                                 'x', 0, 0, 0};
    EXPECT_EQ(w.bytes(), want);
}

TEST(Xdr, ReadsBackWhatItWrites) {
    Writer w;
    w.u32(7);
    w.i64(-5);
    w.f64(2.5);
    w.boolean(true);
    w.string("");
    w.optional_string(std::string("domain"));
    std::vector<uint8_t> blob = {1, 2, 3};
    w.opaque(blob);
    uint8_t uuid[16] = {9, 8, 7};
    w.fixed_opaque(uuid);
    Reader r(w.bytes());
    EXPECT_EQ(*r.u32(), 7u);
    EXPECT_EQ(*r.i64(), -5);
    EXPECT_EQ(*r.f64(), 2.5);
    EXPECT_TRUE(*r.boolean());
    EXPECT_EQ(*r.string(10), "");
    EXPECT_EQ(r.optional_string(10)->value_or(""), "domain");
    EXPECT_EQ(*r.opaque(10), blob);
    uint8_t back[16] = {};
    ASSERT_TRUE(r.fixed_opaque(back));
    EXPECT_EQ(back[0], 9);
    EXPECT_TRUE(r.finish());
}

TEST(Xdr, RefusesWhatAPeerCouldLieAbout) {
    Writer w;
    w.string("longer than four");
    EXPECT_FALSE(Reader(w.bytes()).string(4)) << "a string past its bound";
    std::vector<uint8_t> truncated(w.bytes().begin(), w.bytes().end() - 4);
    EXPECT_FALSE(Reader(truncated).string(100)) << "a string past the end";
    Writer huge;
    huge.u32(std::numeric_limits<uint32_t>::max());
    EXPECT_FALSE(Reader(huge.bytes()).string(std::numeric_limits<uint32_t>::max())) << "a length past the end";
    EXPECT_FALSE(Reader(huge.bytes()).count(1000, 4)) << "a count past its bound";
    Writer many;
    many.u32(10);
    many.u32(1);
    EXPECT_FALSE(Reader(many.bytes()).count(100, 4)) << "ten elements in four bytes";
    std::vector<uint8_t> bad_pad = {0, 0, 0, 1, 'a', 0, 1, 0};
    EXPECT_FALSE(Reader(bad_pad).string(10)) << "non-zero padding";
    // libvirtd reads any non-zero boolean as true (xdr_bool), and go-libvirt relies on it for an
    // optional string's "present" word.
    std::vector<uint8_t> two = {0, 0, 0, 2, 0x80, 0, 0, 0, 0, 0, 0, 1, 'x', 0, 0, 0};
    Reader r2(two);
    EXPECT_TRUE(*r2.boolean()) << "a boolean of 2";
    EXPECT_EQ(r2.optional_string(10)->value_or("absent"), "x") << "present, said with 0x80000000";
    Writer extra;
    extra.u32(1);
    extra.u32(2);
    Reader r(extra.bytes());
    ASSERT_TRUE(r.u32());
    EXPECT_FALSE(r.finish()) << "bytes left over";
}

}  // namespace
}  // namespace vmmd::xdr

#include "vmm/migration/wire/file_format.h"

#include <gtest/gtest.h>

#include <cstring>

namespace vmm::migration {

namespace {
FileHeader sample() {
    FileHeader h = file_layout({{"pc.ram", 0, 256ull << 20}, {"high", 4ull << 30, 1ull << 30}}, 2);
    h.stream_length = 5000;
    h.stream_sum = 0x1234;
    h.save_id = 77;
    return h;
}
}  // namespace

TEST(FileFormat, TheLayoutKeepsEveryAreaOnPagesAndApart) {
    FileHeader h = sample();
    EXPECT_EQ(h.blocks[0].ram_offset, kFileHeaderSize);
    EXPECT_EQ(h.blocks[1].ram_offset, kFileHeaderSize + (256ull << 20));
    EXPECT_EQ(h.blocks[0].sums_offset, h.blocks[1].ram_offset + (1ull << 30));
    EXPECT_EQ(h.blocks[1].sums_offset, h.blocks[0].sums_offset + sums_bytes(256ull << 20));
    EXPECT_EQ(h.stream_offset, h.blocks[1].sums_offset + sums_bytes(1ull << 30));
    EXPECT_EQ(file_end(h), h.stream_offset + 5000);
}

TEST(FileFormat, TheHeaderRoundTripsInOnePage) {
    auto bytes = encode_file_header(sample());
    ASSERT_TRUE(bytes) << bytes.error().message();
    EXPECT_EQ(bytes->size(), kFileHeaderSize);
    auto h = decode_file_header(*bytes);
    ASSERT_TRUE(h) << h.error().message();
    EXPECT_EQ(*h, sample());
}

TEST(FileFormat, ADamagedOrForeignHeaderIsRefusedSayingWhy) {
    auto good = *encode_file_header(sample());
    auto with = [&](size_t at, uint8_t v) {
        auto b = good;
        b[at] = v;
        auto h = decode_file_header(b);
        return h ? std::string("accepted") : h.error().message();
    };
    EXPECT_EQ(with(0, 'X'), "not a saved guest (no vmm save header: a save that did not finish, or another kind of file)");
    EXPECT_EQ(with(8, 2), "saved guest of format version 2; this vmm reads version 1: restore it with the vmm release that saved it");
    EXPECT_EQ(with(30, 0xee), "saved guest: its header is damaged (its sum does not match)");
    EXPECT_EQ(decode_file_header(std::vector<uint8_t>(100)).error().message(),
              "not a saved guest: 100 bytes, shorter than a header (8192)");
}

// Sums that are right for what they cover still cannot make a layout that reads outside the save
// or lets two areas share bytes.
TEST(FileFormat, AnOverlappingOrUnalignedLayoutIsRefusedEvenWithItsSumRight) {
    auto refused = [](FileHeader h) {
        auto bytes = encode_file_header(h);
        if (!bytes) return bytes.error().message();
        auto d = decode_file_header(*bytes);
        return d ? std::string("accepted") : d.error().message();
    };
    FileHeader h = sample();
    h.blocks[1].ram_offset = h.blocks[0].ram_offset + 4096;
    EXPECT_EQ(refused(h), "saved guest: block 'high' overlaps block 'pc.ram'");
    h = sample();
    h.blocks[0].sums_offset += 8;
    EXPECT_EQ(refused(h), "saved guest: the sums of block 'pc.ram' does not start on a page");
    h = sample();
    h.blocks[0].ram_offset = 0;
    EXPECT_EQ(refused(h), "saved guest: block 'pc.ram' overlaps the header");
    h = sample();
    h.stream_length = kMaxFileStream + 1;
    EXPECT_EQ(refused(h), "saved guest: a stream of 134217729 bytes at " + std::to_string(h.stream_offset) +
                              " (1 byte to 128 MiB)");
    h = sample();
    h.blocks[0].size = 4095;
    EXPECT_EQ(refused(h), "saved guest: block 'pc.ram' has 4095 bytes (whole pages, at most 64 TiB)");
    h = sample();
    h.blocks.resize(kMaxBlocks + 1, h.blocks[0]);
    EXPECT_EQ(refused(h), "saved guest: 65 RAM blocks (1 to 64)");
    h = sample();
    h.blocks.resize(kMaxBlocks, {std::string(64, 'n'), 0, 4096, 0, 0});
    EXPECT_TRUE(encode_file_header(h)) << "the most blocks a machine can have, with the longest names, fit";
}

TEST(FileFormat, AnIncrementalSaveNamesItsBaseByIdAndPath) {
    FileHeader h = sample();
    h.base_id = 5;
    h.base_path = "/var/lib/vmm/base.save";
    auto back = decode_file_header(*encode_file_header(h));
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(*back, h);
    auto refused = [](FileHeader x) {
        auto d = decode_file_header(*encode_file_header(x));
        return d ? std::string("accepted") : d.error().message();
    };
    FileHeader half = h;
    half.base_path.clear();
    EXPECT_EQ(refused(half), "saved guest: its base is named by half (an id without a path, or a path without an id) or is itself");
    FileHeader self = h;
    self.base_id = self.save_id;
    EXPECT_EQ(refused(self), "saved guest: its base is named by half (an id without a path, or a path without an id) or is itself");
    FileHeader none = sample();
    none.save_id = 0;
    EXPECT_EQ(refused(none), "saved guest: no save id");
    FileHeader long_path = h;
    long_path.base_path.assign(kMaxBasePath + 1, 'p');
    EXPECT_EQ(refused(long_path), "saved guest: a base path of 1025 bytes");
}

TEST(FileFormat, AZeroPagesSlotIsZeroAndAnyOtherPagesIsNot) {
    std::vector<uint8_t> page(4096, 0);
    EXPECT_EQ(page_slot(page.data()), 0u);
    page[4095] = 1;
    uint64_t one = page_slot(page.data());
    EXPECT_NE(one, 0u);
    page[4095] = 2;
    EXPECT_NE(page_slot(page.data()), one);
}

}  // namespace vmm::migration

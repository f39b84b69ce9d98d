#include "vmmd/domain/save_image.h"

#include <gtest/gtest.h>

namespace vmmd {

TEST(SaveImage, TheHeaderRoundTripsAndPadsToAPage) {
    SaveImageHeader h{"<domain type='vmm'><name>a</name></domain>", true};
    auto bytes = encode_save_image_header(h);
    EXPECT_EQ(bytes.size(), 4096u);
    EXPECT_EQ(save_image_offset(static_cast<uint32_t>(h.xml.size())), 4096u);
    auto back = decode_save_image_header(bytes);
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(*back, h);
    h.xml.assign(5000, 'x');
    EXPECT_EQ(encode_save_image_header(h).size(), 8192u);
}

TEST(SaveImage, AForeignDamagedOrShortHeaderIsRefusedSayingWhy) {
    auto good = encode_save_image_header({"<domain/>", false});
    auto with = [&](size_t at, uint8_t v) {
        auto b = good;
        b[at] = v;
        auto h = decode_save_image_header(b);
        return h ? std::string("accepted") : h.error().message();
    };
    EXPECT_EQ(with(0, 'X'), "not a domain saved by vmmd (no vmmd save header)");
    EXPECT_EQ(with(8, 7), "a save image of version 7; this vmmd reads version 1");
    EXPECT_EQ(with(12, 3), "save image header: unknown flags 0x2");
    EXPECT_EQ(with(19, 0x80), "save image header: a definition of 2147483657 bytes (1 to 1048576)");
    EXPECT_EQ(decode_save_image_header(std::span(good).first(25)).error().message(),
              "save image header: its definition ends 4 bytes early (truncated?)");
    EXPECT_EQ(decode_save_image_header(std::span(good).first(3)).error().message(),
              "not a domain saved by vmmd (no vmmd save header)");
}

}  // namespace vmmd

#include "vmm/devices/serial.h"

#include <gtest/gtest.h>

namespace vmm::devices {

namespace {
void out8(Serial& s, uint16_t off, uint8_t v) { s.io_write(0, off, std::span<const uint8_t>(&v, 1)); }
uint8_t in8(Serial& s, uint16_t off) {
    uint8_t v = 0;
    s.io_read(0, off, std::span<uint8_t>(&v, 1));
    return v;
}
}  // namespace

TEST(Serial, TransmittedBytesReachTheSinkAndTheTransmitterIsAlwaysReady) {
    std::string out;
    Serial s([&out](std::string_view b) { out += b; });
    EXPECT_EQ(in8(s, 5) & 0x60, 0x60);  // LSR: THR empty, transmitter idle
    for (char c : std::string("hi\n")) out8(s, 0, static_cast<uint8_t>(c));
    EXPECT_EQ(out, "hi\n");
    EXPECT_EQ(s.bytes_written(), 3u);
}

TEST(Serial, DivisorLatchDoesNotTransmit) {
    std::string out;
    Serial s([&out](std::string_view b) { out += b; });
    out8(s, 3, 0x80);  // DLAB on
    out8(s, 0, 0x01);  // DLL
    out8(s, 1, 0x00);  // DLM
    EXPECT_EQ(in8(s, 0), 0x01);
    out8(s, 3, 0x03);  // 8N1, DLAB off
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(in8(s, 3), 0x03);
}

TEST(Serial, StateRoundTripsAndBadStateLeavesTheDeviceUnchanged) {
    Serial a(nullptr);
    out8(a, 3, 0x83);
    out8(a, 0, 0x0c);
    out8(a, 3, 0x03);
    out8(a, 7, 0x5a);
    out8(a, 0, 'x');
    ByteWriter w;
    a.save(w);
    Serial b(nullptr);
    ByteReader r(w.bytes(), "serial0");
    ASSERT_TRUE(b.load(r));
    ByteWriter w2;
    b.save(w2);
    EXPECT_EQ(w.bytes(), w2.bytes());
    EXPECT_EQ(in8(b, 7), 0x5a);

    Serial c(nullptr);
    std::vector<uint8_t> truncated(w.bytes().begin(), w.bytes().begin() + 4);
    ByteReader tr(truncated, "serial0");
    EXPECT_FALSE(c.load(tr));
    EXPECT_EQ(in8(c, 7), 0);
    std::vector<uint8_t> bad_version = w.bytes();
    bad_version[0] = 99;
    ByteReader br(bad_version, "serial0");
    EXPECT_FALSE(c.load(br));
}

}  // namespace vmm::devices

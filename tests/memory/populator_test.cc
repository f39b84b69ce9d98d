// Populator: what it populates becomes resident and reads as before (zero where never written,
// the data where written); quiesce waits for it; a full queue drops rather than blocks.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "vmm/common/mapping.h"
#include "vmm/memory/populator.h"

namespace vmm::memory {

namespace {
constexpr size_t kSize = 8 << 20;

size_t resident_pages(uint8_t* p, size_t len) {
    std::vector<unsigned char> v(len / 4096);
    EXPECT_EQ(::mincore(p, len, v.data()), 0);
    size_t n = 0;
    for (auto c : v) n += c & 1;
    return n;
}
}  // namespace

TEST(Populator, PopulatesWithoutChangingWhatMemoryReads) {
#ifndef MADV_POPULATE_WRITE
    GTEST_SKIP() << "needs MADV_POPULATE_WRITE (Linux 5.14 headers)";
#endif
    auto m = Mapping::map("test", kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
    ASSERT_TRUE(m);
    uint8_t* p = m->data();
    std::memset(p + 4096, 0xab, 4096);  // written before: must survive
    Populator pop;
    pop.ahead({p, kSize / 2});
    pop.quiesce();
    EXPECT_EQ(pop.populated_bytes(), kSize / 2);
    EXPECT_EQ(resident_pages(p, kSize / 2), kSize / 2 / 4096);
    EXPECT_LT(resident_pages(p + kSize / 2, kSize / 2), kSize / 2 / 4096) << "populated beyond the range";
    for (size_t i = 0; i < kSize / 2; ++i) {
        uint8_t want = (i >= 4096 && i < 8192) ? 0xab : 0;
        ASSERT_EQ(p[i], want) << "at byte " << i;
    }
}

TEST(Populator, AFullQueueDropsInsteadOfBlocking) {
    auto m = Mapping::map("test", kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
    ASSERT_TRUE(m);
    Populator pop;
    for (int i = 0; i < 64; ++i) pop.ahead({m->data() + (i % 8) * (1 << 20), 1 << 20});  // returns at once
    pop.quiesce();
    EXPECT_LT(pop.populated_bytes(), uint64_t{64} << 20);
    EXPECT_GE(pop.populated_bytes(), uint64_t{1} << 20);
}

}  // namespace vmm::memory

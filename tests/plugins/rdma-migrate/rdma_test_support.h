// What the hostile-peer tests share: the device they run on, a RAM stand-in, and sizes.
#pragma once

#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

#include "connection.h"

namespace rdma_migrate::test {

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint32_t kChunkShift = 16;
constexpr uint64_t kRam = 16 * kChunk;  // one block of 16 chunks
constexpr uint8_t kFill = 0xa5;
constexpr Timeouts kTimeouts{10000, 10000};

inline std::string rdma_addr() {
    const char* a = std::getenv("VMM_RDMA_ADDR");
    return a != nullptr ? a : "";
}

#define REQUIRE_RDMA()                                                                                    \
    do {                                                                                                  \
        if (rdma_addr().empty())                                                                          \
            GTEST_SKIP() << "needs an RDMA device ($VMM_RDMA_ADDR): run scripts/softroce-run.sh ctest "   \
                            "--test-dir build -L rdma";                                                   \
    } while (0)

// An RDMA-CM port for one test's listener (each test runs in a process of its own).
inline uint16_t some_port() {
    static std::mt19937 rng(std::random_device{}());
    return static_cast<uint16_t>(20000 + rng() % 20000);
}

// Guest RAM stand-in: anonymous, page-aligned, filled with `fill`.
struct Ram {
    explicit Ram(uint8_t fill = kFill)
        : p(static_cast<uint8_t*>(::mmap(nullptr, kRam, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))),
          fill_(fill) {
        if (p == MAP_FAILED) throw std::runtime_error("mmap of the test RAM failed");
        std::memset(p, fill, kRam);
    }
    ~Ram() { ::munmap(p, kRam); }
    Ram(const Ram&) = delete;
    Ram& operator=(const Ram&) = delete;
    // Bytes in [from, to) that no longer hold the fill.
    uint64_t changed(uint64_t from = 0, uint64_t to = kRam) const {
        uint64_t n = 0;
        for (uint64_t i = from; i < to; ++i) n += p[i] != fill_;
        return n;
    }
    uint8_t* p;

private:
    uint8_t fill_;
};

}  // namespace rdma_migrate::test

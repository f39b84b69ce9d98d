// What the hostile-peer tests share: a RAM stand-in, sizes, timeouts, a listening port.
#pragma once

#include <gtest/gtest.h>

#include <sys/mman.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "control_channel.h"
#include "endpoint.h"
#include "rdma_device.h"

namespace rdma_migrate::test {

using vmm::test::rdma_addr;

constexpr uint32_t kChunkShift = 20;
constexpr uint64_t kChunk = uint64_t{1} << kChunkShift;  // 1 MiB: x-rdma-chunk-size's least
constexpr uint64_t kRam = 16 * kChunk;  // one block of 16 chunks
constexpr uint8_t kFill = 0xa5;
constexpr Timeouts kTimeouts{10000, 10000};
// How long a test's destination waits for its source before it gives up: a peer that never
// connects fails the test in one line instead of hanging until ctest's timeout.
constexpr int kAcceptWaitMs = 3 * kTimeouts.connect_ms;

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

// Posts one signalled work request of `len` bytes of `buf` (registered with `lkey`) on `qp`: an
// RDMA WRITE to (addr, rkey) or a SEND. Its completion goes to the control channel's on_other,
// as RDMA WRITEs' do. Returns 0 when it was posted (verbs.h's post_one_send), else -1.
inline int post_one(ibv_qp* qp, ibv_wr_opcode op, const void* buf, uint32_t len, uint32_t lkey, uint64_t addr = 0,
                    uint32_t rkey = 0) {
    return post_one_send(qp, make_wr_id(WrKind::write, 1), op, buf, len, lkey, "ibv_post_send", addr, rkey) ? 0 : -1;
}

// The plugin's own side of a test (a SourceSession or DestinationSession), on a thread of its own: its body returns "" when
// it went through, else its error text, which result() waits for (up to 60 s).
class PeerThread {
public:
    void start(std::function<std::string()> body) {
        thread_ = std::thread([this, body = std::move(body)] { result_.set_value(body()); });
    }
    ~PeerThread() {
        if (thread_.joinable()) thread_.join();
    }
    std::string result() {
        auto f = result_.get_future();
        if (f.wait_for(std::chrono::seconds(60)) != std::future_status::ready) return "still running after 60 s";
        thread_.join();
        return f.get();
    }

private:
    std::promise<std::string> result_;
    std::thread thread_;
};

}  // namespace rdma_migrate::test

// WriteLedger: one queue pair's RDMA WRITEs, numbered as they are posted, and how many of them
// and of their bytes are known to be in the destination's memory. Only every 64th write is signalled (spec), but on an RC queue pair a
// completion vouches for every write posted before it; the ledger keeps the running byte total
// at each write index still in the window, so a completion for write i turns into "every byte
// posted through i has arrived". The session reports as in flight what it was given and the
// ledgers do not yet vouch for, so `transferred` never counts what was merely posted (up to 144
// writes, and about 16 MiB on the wire, may be in flight on a lane: session_ram.cc).
#pragma once

#include <array>
#include <cstdint>

namespace rdma_migrate {

class WriteLedger {
public:
    // More writes than may ever be in flight at once on one lane (128 + a batch of 16 + 1 drain).
    static constexpr uint64_t kWindow = 256;

    // Numbers the next write (1, 2, 3 …), which carries `bytes` (0 for the re-posted 8 bytes
    // that drain a lane: they are counted already), and returns its number.
    uint64_t post(uint64_t bytes) {
        posted_bytes_ += bytes;
        through_[++last_ % kWindow] = posted_bytes_;
        return last_;
    }

    // A completion for write `index`: it and every earlier write have arrived. Indexes never
    // posted, or not past what is known, change nothing; one further back than the window
    // (never, with the session's send window) would leave the bytes behind, never ahead.
    void completed(uint64_t index) {
        if (index <= done_ || index > last_) return;
        done_ = index;
        if (last_ - index < kWindow) done_bytes_ = through_[index % kWindow];
    }

    uint64_t posted() const { return last_; }  // writes posted
    uint64_t done() const { return done_; }    // writes known complete
    uint64_t in_flight() const { return posted_bytes_ - done_bytes_; }
    uint64_t delivered() const { return done_bytes_; }

private:
    std::array<uint64_t, kWindow> through_{};  // bytes posted through write i, at i % kWindow
    uint64_t last_ = 0, done_ = 0;
    uint64_t posted_bytes_ = 0, done_bytes_ = 0;
};

}  // namespace rdma_migrate

// PullClient (proto/pull_wire.h; docs/rdma-protocol.md, "Pulling a saved guest"): a connection
// to a PullServer and reads of what it serves by RDMA READ, a piece (kPiece) at a time into a
// landing area of its own, several at once as the server's queue pair takes them, copied out
// in order. Now and then (each 32 MiB or second), and when it ends, it tells the server how
// much it has read.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "endpoint.h"
#include "proto/pull_wire.h"
#include "vmm/common/mapping.h"

namespace rdma_migrate {

class PullClient {
public:
    static constexpr uint64_t kPiece = 1ull << 20;  // one READ at most
    static constexpr uint32_t kSlots = 8;           // READs at once at most (landing pieces)

    static Result<std::unique_ptr<PullClient>> open(const std::string& host, uint16_t port, int cancel_fd, Timeouts t);
    ~PullClient();  // DONE (when the link still works), then hangs up
    PullClient(const PullClient&) = delete;
    PullClient& operator=(const PullClient&) = delete;

    uint64_t length() const { return offer_.length; }
    // Bytes [at, at + length) of what the server serves, into `into`; from any thread (one at a time).
    Status read(void* into, uint64_t length, uint64_t at);

    // The hostile-peer tests: what the server offered, and the connection, to aim READs of their own.
    const PullMessage& offer() const { return offer_; }
    Endpoint& endpoint() { return *ep_; }

private:
    PullClient() = default;
    Status take(const ibv_wc& wc, uint8_t* into, uint64_t length, uint64_t& copied);
    Status post_read(uint64_t piece, uint64_t length, uint64_t at);
    Status tell(PullType type);  // PULLED or DONE: how much has been read
    uint8_t* slot(uint64_t piece) const { return area_.data() + (piece % kSlots) * kPiece; }
    uint8_t* message(uint32_t i) const { return area_.data() + kSlots * kPiece + i * 64; }

    std::unique_ptr<Endpoint> ep_;
    vmm::Mapping area_;  // kSlots landing pieces, then the receive (OFFER) and send buffers
    MemoryRegion mr_;
    PullMessage offer_;
    uint32_t reads_ = 1;
    std::mutex mutex_;
    uint64_t pulled_ = 0, told_ = 0;
    std::chrono::steady_clock::time_point told_at_{};
    bool telling_ = false;  // a PULLED not yet complete
};

}  // namespace rdma_migrate

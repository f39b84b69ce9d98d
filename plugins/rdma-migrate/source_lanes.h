// LaneWriter: the source's RDMA WRITEs (spec: "Migration of VM's ram"), striped over its
// queue pairs: lane i writes on channel i, chunk c goes to lane c % N, all on one PD. Each lane
// posts its writes in batches (one doorbell per batch), signals every 64th write (or every
// 8 MiB), keeps at most ~16 MiB on the wire, and drains by re-posting its last write
// signalled. Lane 0 shares its completion queue with the control channel, the others have
// their own. What arrived is counted per lane (WriteLedger), for ram_in_flight and for
// verify-ram's sums, which wait for the writes they vouch for (the session's hooks).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "control_channel.h"
#include "endpoint.h"
#include "proto/write_ledger.h"

namespace rdma_migrate {

class LaneWriter {
public:
    // What the writer asks of its session while it waits for a lane's completions.
    struct Hooks {
        std::function<bool()> sums_due;     // verify-ram sums are ready to go ...
        std::function<Status()> send_sums;  // ... and are sent, then the wait goes on
        std::function<void(uint64_t)> landed;  // the writes that sums range `n` waited for have all landed
    };

    // Lane 0 writes on `first`, whose completion queue `ctl` reads.
    LaneWriter(ControlChannel& ctl, Endpoint& first, Hooks hooks);
    LaneWriter(const LaneWriter&) = delete;
    LaneWriter& operator=(const LaneWriter&) = delete;

    void add_lane(Endpoint& ep) { lanes_.emplace_back(&ep); }
    size_t size() const { return lanes_.size(); }

    // Where a write's bytes are in the guest's RAM (block, offset), for on_landed.
    struct RamAt {
        uint32_t block = 0;
        uint64_t offset = 0;
    };
    // Queues one RDMA WRITE (its remote address, rkey and local buffer set) on chunk `chunk`'s
    // lane, of the guest RAM at `at`; `sums` (0: none) is the verify-ram range whose sums count on it.
    Status write(uint64_t chunk, ibv_send_wr wr, ibv_sge sge, uint64_t sums, RamAt at);
    // Batches left short go to the HCA now rather than when later writes fill them.
    Status post_short_batches();
    // Every write posted and known complete.
    Status drain();
    // Takes the completions that have come, without waiting.
    Status reap();

    // Bytes handed over (ram_send) and not yet known to have arrived.
    void accept(uint64_t bytes) { accepted_ += bytes; }
    uint64_t in_flight() const;
    // `fn(ctx)` is called whenever more of what in_flight() counts has arrived (NULL: never).
    void on_arrival(void (*fn)(void*), void* ctx) {
        arrival_fn_ = fn;
        arrival_ctx_ = ctx;
    }
    // `fn` hears of each write, once it is known complete, with its guest RAM (block, offset,
    // length); empty: none (the writes from then on are not remembered).
    using LandedFn = std::function<void(uint32_t block, uint64_t offset, uint64_t length)>;
    void on_landed(LandedFn fn) { landed_fn_ = std::move(fn); }

private:
    // One queue pair's RDMA WRITEs: the writes posted and known complete (and their bytes),
    // the batch being built, and its last write (re-posted, 8 bytes, signalled, to drain it).
    struct Lane {
        explicit Lane(Endpoint* e) : ep(e) {}
        Endpoint* ep;
        WriteLedger ledger;
        uint64_t last_signalled = 0;     // the last write queued signalled
        uint64_t signalled_on_wire = 0;  // the last signalled write handed to the HCA
        uint64_t unsignalled_bytes = 0;  // queued since the last signalled write
        ibv_send_wr last_wr{};
        ibv_sge last_sge{};
        std::vector<ibv_send_wr> wrs;
        std::vector<ibv_sge> sges;
        std::deque<std::pair<uint64_t, uint64_t>> tags;  // write index, the sums range counting on it
        struct Landing {
            uint64_t index;
            RamAt at;
            uint64_t length;
        };
        std::deque<Landing> landings;  // writes on_landed's callback has yet to hear of
    };

    Status post(Lane& lane);
    Status post_drain(Lane& lane);
    Status progress(Lane& lane, const std::function<bool()>& done);
    // Waits on a lane's completions until `done`, sending the sums they make ready meanwhile.
    Status wait(Lane& lane, const std::function<bool()>& done);
    // The completion handler of a lane other than lane 0, whose CQ the control channel reads.
    std::function<Status(const ibv_wc&)> on_completion(Lane& lane);
    void completed(Lane& lane, uint64_t index);  // and tells on_arrival's callback

    ControlChannel& ctl_;
    Hooks hooks_;
    std::vector<Lane> lanes_;
    uint64_t accepted_ = 0;
    void (*arrival_fn_)(void*) = nullptr;
    void* arrival_ctx_ = nullptr;
    LandedFn landed_fn_;
};

}  // namespace rdma_migrate

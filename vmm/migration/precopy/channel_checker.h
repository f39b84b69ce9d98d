// ChannelChecker: the destination's side of verify-ram over a RAM channel that delivers the
// source's page sums while its round runs (the RDMA plugin sends a page's sum once its write is
// known to have landed). Each delivery is checked (the XXH3 of the landed pages against the
// source's sums, through the RamVerifier) on a thread of its own, so checking keeps pace with
// the wire instead of following the round; at the round's end only what arrived last is left.
// The pages that matched are whole here as of their round: a resumable precopy hears of them
// (on_checked), so a link that breaks mid-round costs only what was not checked yet.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/memory/guest_memory.h"
#include "vmm/migration/transport/ram_verifier.h"

namespace vmm::migration {

class ChannelChecker {
public:
    ChannelChecker(const memory::GuestMemory& mem, RamVerifier& verifier);
    ~ChannelChecker();  // stops the thread (what is still queued goes unchecked: the round failed)
    ChannelChecker(const ChannelChecker&) = delete;
    ChannelChecker& operator=(const ChannelChecker&) = delete;

    // (block, first page, count, round): pages whose sums matched, from the checker's thread.
    using CheckedFn = std::function<void(uint32_t, uint64_t, uint64_t, uint32_t)>;
    // Set between rounds (nothing queued is checked for it yet); nullptr stops it.
    void on_checked(CheckedFn fn);

    // Queues the check of sums.size() pages from `offset` in `block` (copied), sent in `round`;
    // a range outside the block, or not page-aligned, is refused (a transport's word is peer input).
    Status add(uint32_t block, uint64_t offset, std::span<const uint64_t> sums, uint32_t round);
    // At the end of a round: waits until every queued check is done, counting what was left late.
    void drain();
    // When the link broke: checks what landed before it, so that it counts as arrived.
    void finish_queued();
    // Bytes whose check had not finished when drain() was called (what checking added to the
    // rounds' ends), over the whole migration.
    uint64_t late_bytes() const;

private:
    struct Job {
        uint32_t block;
        uint64_t offset;
        std::vector<uint64_t> sums;
        uint32_t round;
    };
    void run();
    void check(const Job& job);  // outside mu_
    void wait_idle(bool round_end);  // until nothing is queued or checked; a round's end counts what was left

    const memory::GuestMemory& mem_;
    RamVerifier& verifier_;
    mutable std::mutex mu_;
    std::condition_variable wake_, idle_;
    std::deque<Job> jobs_;
    CheckedFn checked_;
    uint64_t queued_bytes_ = 0;  // in jobs_ and the one being checked
    uint64_t late_bytes_ = 0;
    bool busy_ = false;
    bool stop_ = false;
    std::thread thread_;  // last: starts once everything above exists
};

}  // namespace vmm::migration

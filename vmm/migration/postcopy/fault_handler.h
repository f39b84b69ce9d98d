// FaultHandler: the destination's fault thread in postcopy. It reads the userfaultfd; a fault on
// a page the destination lacks becomes a PAGE_REQUEST to the source (once per page), and a
// fault on any other page (zero on the source: sent as ZERO or never populated there) is
// settled here with the zero page, without asking. The receiving thread reports each placement
// (placed()), which closes the request's latency sample and the faulting vCPU's blocked time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "vmm/common/fd.h"
#include "vmm/common/result.h"
#include "vmm/migration/postcopy/missing_pages.h"
#include "vmm/migration/postcopy/userfault.h"
#include "vmm/migration/core/stats.h"

namespace vmm::migration {

class FaultHandler {
public:
    using Clock = std::chrono::steady_clock;
    // Sends one request (block, byte offset, bytes); called on the fault thread.
    using RequestFn = std::function<Status(uint32_t block, uint64_t offset, uint32_t length)>;

    // `vcpu_tids[i]` is vCPU i's thread id (for the guest's blocked time; 0 = unknown).
    FaultHandler(Userfault& uffd, MissingPages& missing, std::vector<uint32_t> vcpu_tids, RequestFn request);
    ~FaultHandler();  // stops and joins
    FaultHandler(const FaultHandler&) = delete;
    FaultHandler& operator=(const FaultHandler&) = delete;

    Status start();
    void stop();
    // The receiving thread placed [first_page, first_page + count) of `block`.
    void placed(uint32_t block, uint64_t first_page, uint64_t count);
    // Requests, zero pages settled here, fault latency and the guest's blocked time.
    void fill(PostcopyStats& out) const;
    // The first request that could not be sent (the link to the source failed), if any.
    std::optional<Error> failure() const;
    // After a recovery: forgets the failure and sends again every request still unanswered.
    Status resend_pending();

private:
    void loop();
    void handle(const Userfault::Fault& f, Clock::time_point now);
    void block_vcpu(uint32_t tid, uint64_t key, Clock::time_point now);
    void unblock_waiting_on(uint64_t key, Clock::time_point now);
    static uint64_t key(uint32_t block, uint64_t page) { return (uint64_t{block} << 48) | page; }

    Userfault& uffd_;
    MissingPages& missing_;
    std::vector<uint32_t> vcpu_tids_;
    RequestFn request_;
    UniqueFd stop_fd_;
    std::thread thread_;

    mutable std::mutex mutex_;
    std::unordered_map<uint64_t, Clock::time_point> requested_;  // page -> when it was asked for
    struct Blocked {
        bool blocked = false;
        uint64_t key = 0;
        Clock::time_point since{};
        double total_ms = 0;
    };
    std::vector<Blocked> vcpus_;
    uint32_t blocked_now_ = 0;
    Clock::time_point all_blocked_since_{};
    double all_blocked_ms_ = 0;
    uint64_t requests_ = 0;
    uint64_t zero_local_ = 0;
    LatencySamples latency_;
    std::optional<Error> failure_;
};

// A destination's figures from its set of missing pages and its fault thread (either may be
// absent yet): what a postcopy and a lazy restore report alike.
PostcopyStats fault_stats(const MissingPages* missing, const FaultHandler* faults);

}  // namespace vmm::migration

// Precopy resumed after a broken link (x-resume-window): what each side keeps, and what the
// destination tells the source on the new connection. Pure: no I/O, no machine.
//
// The destination keeps, per page, the round in which the page last arrived whole
// (`ArrivalRounds`). The source keeps, per page, the round that was to carry its current
// contents (`SentRounds`: 0 for every page at the bulk round; round r for each page of the dirty
// bitmap taken for round r). On the new connection the destination sends its rounds
// (RECEIVED_ROUNDS, return_path.h, in page order); the source sends again exactly the pages
// whose current contents have not arrived (arrived < sent, or never), plus what the guest
// dirtied since (the dirty log, taken as for any round). A page whose record was in flight, or
// torn, when the link broke has not arrived in its round, so it goes again; a page that did
// arrive is never sent twice.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/migration/wire/return_path.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

// The destination's side: pages landed, round by round.
class ArrivalRounds {
public:
    explicit ArrivalRounds(const std::vector<BlockInfo>& blocks);
    // `count` pages of `block` from `first_page` arrived whole in `round` (checked ranges only).
    // Safe from several threads at once (multifd's lanes; a RAM channel and its sums' checker);
    // a page keeps the latest round it was said to arrive in.
    void landed(uint32_t block, uint64_t first_page, uint64_t count, uint32_t round);
    // The page's last copy did not arrive whole after all (its check failed).
    void unarrived(uint32_t block, uint64_t page);
    // The RECEIVED_ROUNDS messages describing every page, in order.
    std::vector<std::vector<uint8_t>> encode() const;
    // Read only while nothing lands (between connections, or in tests).
    const std::vector<std::vector<uint32_t>>& rounds() const { return rounds_; }

private:
    mutable std::mutex mu_;
    std::vector<std::vector<uint32_t>> rounds_;  // per block, per page; kNeverArrived at first
};

// The source's side: the round meant to carry each page's current contents.
class SentRounds {
public:
    explicit SentRounds(const std::vector<uint64_t>& pages_per_block);  // every page: the bulk round (0)
    // The dirty bitmaps taken for `round`: their pages' current contents go in it.
    void taken(uint32_t round, const std::vector<std::vector<uint64_t>>& bitmaps);
    uint32_t last() const { return last_; }
    const std::vector<std::vector<uint32_t>>& rounds() const { return rounds_; }

private:
    std::vector<std::vector<uint32_t>> rounds_;
    uint32_t last_ = 0;
};

// The source reads the destination's RECEIVED_ROUNDS: every page described once, in order, no
// round later than the last the source began (a destination that claims more is lying).
class ReportedRounds {
public:
    ReportedRounds(const std::vector<uint64_t>& pages_per_block, uint32_t last_round);
    Status add(const ReturnMessage& m, std::span<const uint32_t> rounds);
    bool complete() const;
    // What the source's own transport vouches for beside the destination's report (an RDMA
    // WRITE completed on a reliable connection is in the destination's memory, though the
    // destination never saw it land): each page's later round of the two. Returns how many
    // pages it moved on (for the log).
    uint64_t also_arrived(const ArrivalRounds& delivered);
    const std::vector<std::vector<uint32_t>>& rounds() const { return rounds_; }
    // Pages said to have arrived whole in some round.
    uint64_t held() const;

private:
    std::vector<std::vector<uint32_t>> rounds_;
    std::vector<uint64_t> next_;
    uint32_t last_;
};

// The pages to send again, one bitmap per block: whose current contents (per `sent`) have not
// arrived (per `arrived`). `populated(block, page)` says whether a page that never arrived holds
// anything at the source: one never populated there is zero on both sides and is left out (the
// bulk round skipped it too; if the guest touched it since, the dirty log has it).
template <typename Populated>
std::vector<std::vector<uint64_t>> pages_to_resend(const SentRounds& sent, const ReportedRounds& arrived,
                                                   Populated&& populated) {
    std::vector<std::vector<uint64_t>> out;
    for (size_t b = 0; b < sent.rounds().size(); ++b) {
        const auto& s = sent.rounds()[b];
        const auto& a = arrived.rounds()[b];
        out.emplace_back((s.size() + 63) / 64, 0);
        for (uint64_t p = 0; p < s.size(); ++p) {
            bool missing = a[p] == kNeverArrived ? populated(b, p) : a[p] < s[p];
            if (missing) out.back()[p / 64] |= uint64_t{1} << (p % 64);
        }
    }
    return out;
}

}  // namespace vmm::migration

// The time a migration has left, predicted from what it measures as it goes: the bytes still to
// send, the rate the link moves them, the rate the guest dirties memory, and the downtime the
// switch may take. Pure (no I/O), so the model is tested apart from any migration.
//
// Precopy: each round sends what is dirty at the link's rate while the guest dirties more at its
// own, so round k+1 carries q = dirty rate / link rate of round k; once a round fits in what
// downtime-limit leaves after the hand-over, the vCPUs pause and the rest goes. With q >= 1 the
// rounds never shrink: no end is promised (auto-converge, postcopy or a higher downtime-limit
// would give one). A guest that rewrites a hot set dirties no more than that set in a round,
// however long: each round then carries at most the hot set, and the rounds end when it fits
// the pause (or never, when it does not). Postcopy: the pages still missing at the push's rate.
#pragma once

#include <cstdint>
#include <optional>

namespace vmm::migration {

struct EtaFacts {
    uint64_t remaining_bytes = 0;  // dirty now, and what the round under way has still to send
    double link_bytes_per_s = 0;   // what the link moves (measured; at most max-bandwidth)
    double dirty_bytes_per_s = 0;  // what the guest dirties
    double downtime_limit_ms = 300;
    double handover_ms = 0;        // saving and loading the state, as the destination rehearsed it
    double hot_set_bytes = 0;      // what the guest keeps rewriting, when it keeps to a set (0: none seen)
};

struct Eta {
    bool converges = false;        // false: at these rates the rounds never fit the limit
    double remaining_ms = 0;       // to completion, the last pause included (when it converges)
    double downtime_ms = 0;        // the last pause, as predicted
    uint32_t rounds = 0;           // rounds still to run before the last pause
};

// Nothing when the link's rate is not known yet (no byte has moved).
std::optional<Eta> precopy_eta(const EtaFacts& f);
// Postcopy: the missing bytes at the push's rate.
std::optional<Eta> postcopy_eta(uint64_t missing_bytes, double push_bytes_per_s);

}  // namespace vmm::migration

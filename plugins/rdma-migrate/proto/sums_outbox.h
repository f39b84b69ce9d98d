// SumsOutbox: verify-ram's page sums on their way out of the source (kCapSums, beyond the spec
// and QEMU; docs/rdma-protocol.md). The source is given each range's sums before the range; a
// data range's sums are held until every RDMA WRITE of it is known complete (on an RC queue pair
// a completion vouches for every earlier write, so the data is in the destination's memory), a
// zero range's until its COMPRESS has gone; then they are ready, and go in SUMS messages while the
// round runs (once worth a message) and at its end (all of them). Bookkeeping only, no device:
// the session (source_sums.cc) sends what batches() returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "proto/wire.h"

namespace rdma_migrate {

class SumsOutbox {
public:
    // Ready sums worth a message mid-round: 8 MiB of pages (a 16 KiB message), what one
    // signalled write vouches for.
    static constexpr size_t kFlushPages = 2048;

    // The sums of the range handed over next (checked against the blocks by the caller).
    Status give(SumsEntry e);
    // The sums given for the range being handed over now, if any; a range other than the one
    // they were given for is an internal error.
    Result<std::optional<SumsEntry>> take(uint32_t block, uint64_t offset, uint64_t length);
    // A data range's sums wait for its `pieces` writes, each tagged with the number returned
    // (never 0); write_landed(number) once per piece that has landed.
    uint64_t await_writes(SumsEntry e, size_t pieces);
    void write_landed(uint64_t number);
    // A zero range's sums wait for the COMPRESS that carries it; compress_sent() readies them all.
    void await_compress(SumsEntry e) { zero_.push_back(std::move(e)); }
    void compress_sent();

    // Worth a message now (mid-round).
    bool due() const { return ready_pages_ >= kFlushPages; }
    // The entries of the SUMS messages to send now, each message at most kMaxSumsPerMessage sums
    // and kMaxRepeat entries (a longer range is split): mid-round (`all` false) only once due(),
    // at the round's end everything ready. What is returned is no longer held.
    std::vector<std::vector<SumsEntry>> batches(bool all);
    // At the round's end, after its writes drained and its COMPRESS went: nothing may still wait.
    Status round_ended() const;
    // A new round: sums given and never used are dropped.
    void new_round() { next_.reset(); }

private:
    struct Waiting {  // a data range's sums and how many of its writes have not landed yet
        size_t pieces;
        SumsEntry entry;
    };
    void ready(SumsEntry e);

    std::optional<SumsEntry> next_;
    std::map<uint64_t, Waiting> waiting_;
    std::vector<SumsEntry> zero_, ready_;
    size_t ready_pages_ = 0;
    uint64_t numbered_ = 0;
};

}  // namespace rdma_migrate

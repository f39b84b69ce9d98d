// StreamLoader: the destination's reading of a migration stream after the header. RAM records
// land directly in the destination's RAM blocks (no staging copy); transport-channel rounds are
// served by the transport; the STATE record is handed to `on_state`; END ends the stream.
// Every record is checked (block index, alignment, bounds, sizes) before it touches memory.
// POPULATE records hand the run that follows to a Populator, which prepares RAM ahead of it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/memory/guest_memory.h"
#include "vmm/migration/precopy/channel_checker.h"
#include "vmm/migration/precopy/populator.h"
#include "vmm/migration/precopy/resume.h"
#include "vmm/migration/transport/ram_verifier.h"
#include "vmm/migration/wire/stream_format.h"
#include "vmm/migration/transport/landing.h"
#include "vmm/migration/transport/transport.h"

namespace vmm::migration {

// What the loader wrote from the stream itself (pages, zero pages, bytes), and its rounds.
struct LoadCounters : ChannelCounts {
    uint64_t rounds = 0;
    uint64_t announced = 0;  // bytes in POPULATE records
};

class StreamLoader {
public:
    using StateFn = std::function<Status(std::span<const uint8_t>)>;

    // `blocks` is the destination's layout (already checked against the source's header).
    // `verifier`: set when the source announced verify-ram; END then fails if a page is owed.
    StreamLoader(const memory::GuestMemory& mem, stream::ByteStream& stream, DestRamChannel* channel, std::vector<BlockInfo> blocks,
                 StateFn on_state, RamVerifier* verifier = nullptr)
        : mem_(mem), stream_(&stream), channel_(channel), blocks_(std::move(blocks)), on_state_(std::move(on_state)),
          verifier_(verifier) {}

    // Reads records until END. Fails on the first invalid record, writing nothing for it.
    Status run();
    ~StreamLoader();
    StreamLoader(const StreamLoader&) = delete;
    StreamLoader& operator=(const StreamLoader&) = delete;

    // The header announced postcopy-ram and this side allows it: DISCARD records may come, and
    // POSTCOPY ends the stream like END (run() then returns with switched_to_postcopy()).
    void allow_postcopy() { postcopy_allowed_ = true; }
    bool switched_to_postcopy() const { return switched_; }
    // The DISCARD records (checked against the blocks): what postcopy must fetch.
    const std::vector<Record>& discards() const { return discards_; }
    // The RAM channel of a connection whose link broke is let go (before that connection is),
    // its counts kept; reading waits for rebind().
    void leave_channel();
    // A precopy resumed over a new connection (resume.h): reading goes on on its stream and RAM
    // channel (the same kind as before), from the next round's beginning (a round the broken link
    // cut is over), the counts carry on. A source that took its guest back at the switchover
    // sends rounds again, and a new STATE.
    Status rebind(stream::ByteStream& stream, DestRamChannel* channel);
    // Records, page by page, the round each page arrives in (a resumable precopy: resume.h),
    // inline and through the RAM channel. False: the channel cannot say.
    bool track_arrivals(ArrivalRounds* arrivals);
    // The source sums its RAM channel's pages in SUMS records after each round (kFeatureRoundSums).
    void expect_round_sums() { round_sums_ = true; }
    // Each channel round is answered once it has landed (kFeatureRoundLanded).
    void answer_landed_rounds() { landed_rounds_ = true; }
    // The RAM channel delivers the sums while its rounds run (kFeatureChannelSums): they are
    // checked on a thread of their own as they come; a round's end waits for the last of them.
    // Fails when the channel cannot deliver them.
    Status check_channel_sums();
    // Bytes whose check was still to finish when their round ended (kFeatureChannelSums).
    uint64_t checked_late() const { return checker_ ? checker_->late_bytes() : 0; }
    bool checks_channel_sums() const { return checker_ != nullptr; }
    const LoadCounters& counters() const { return counters_; }
    // Bytes the Populator prepared before their data arrived.
    uint64_t populated_ahead() const { return populator_ ? populator_->populated_bytes() : stopped_populated_; }
    // Stops the helper that populates ahead, and waits for it: a run the source cut short
    // (its round stopped for postcopy) must not be populated while userfaultfd takes over.
    void stop_populating() {
        stopped_populated_ = populated_ahead();
        populator_.reset();
    }

private:
    Status load_pages(const Record& r);
    Status load_zero(const Record& r);
    Status load_populate(const Record& r);
    Status load_state(const Record& r);
    Status load_sums(const Record& r);
    Status answer_checked();
    Status round_begin(const Record& r);
    Status load_discard(const Record& r);
    Status finish(bool postcopy);
    Status listen_to_channel();  // the channel's sums and arrivals reach the checker and arrivals_

    const memory::GuestMemory& mem_;
    stream::ByteStream* stream_;
    DestRamChannel* channel_;
    std::vector<BlockInfo> blocks_;
    StateFn on_state_;
    RamVerifier* verifier_;
    LoadCounters counters_;
    bool in_round_ = false;
    uint32_t round_ = 0;
    bool have_state_ = false;
    bool round_sums_ = false;
    bool landed_rounds_ = false;
    bool postcopy_allowed_ = false;
    bool switched_ = false;
    std::vector<Record> discards_;
    std::unique_ptr<Populator> populator_;  // from the first POPULATE record on
    uint64_t stopped_populated_ = 0;        // what it had populated, once stopped
    std::unique_ptr<ChannelChecker> checker_;  // kFeatureChannelSums
    ArrivalRounds* arrivals_ = nullptr;        // track_arrivals()
    ChannelCounts carried_;                    // a left channel's, until the next one carries them
};

}  // namespace vmm::migration

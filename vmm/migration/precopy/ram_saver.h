// RamSaver: sends RAM rounds from the source. The bulk round sends every populated page (the
// pagemap says which); dirty rounds send the pages of the dirty bitmaps. Contiguous pages merge
// into one record; zero pages become ZERO markers; everything is paced by the rate limiter.
// Pages go either inline in the stream or through the transport's RAM channel.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/memory/guest_memory.h"
#include "vmm/memory/populated.h"
#include "vmm/migration/wire/page_sums.h"
#include "vmm/migration/core/rate_limiter.h"
#include "vmm/migration/core/stats.h"
#include "vmm/common/zero_page.h"
#include "vmm/migration/transport/transport.h"

namespace vmm::migration {

class RamSaver {
public:
    // verify-ram. `summed`: inline PAGES go as PAGES_SUMMED, with the XXH3-64 of each page as
    // read here. `round_sums`: the pages a channel that does not checksum itself writes (and
    // zeroes, after the bulk round) are summed here as they are handed to it, and their SUMS
    // records follow the channel's end of round on the stream. `channel_sums`: as round_sums,
    // but the channel carries the sums itself (SourceRamChannel::carries_sums), delivered as the
    // pages land, so the destination checks while the round runs.
    enum class Verify { off, summed, round_sums, channel_sums };
    RamSaver(const memory::GuestMemory& mem, stream::ByteStream& stream, SourceRamChannel* channel, RateLimiter& limiter,
             bool zero_markers, RamStats& stats, Verify verify = Verify::off, PageSummer summer = {});
    ~RamSaver();
    RamSaver(const RamSaver&) = delete;
    RamSaver& operator=(const RamSaver&) = delete;

    // Both keep `stats.remaining` at the bytes of this round's pages not yet sent, marked zero or
    // passed as never populated (QEMU's: what the last sync found dirty, less what went since).
    // Round 0: every populated page (every page when `pagemap` is null).
    Status bulk_round(memory::PagemapReader* pagemap);
    // A dirty round: `bitmaps[i]` holds block i's dirty pages (taken from its DirtyBitmap).
    Status dirty_round(uint32_t round, const std::vector<std::vector<uint64_t>>& bitmaps);
    // Bytes handed to the stream or the channel (all arrived once a round has ended).
    uint64_t bytes_sent() const { return bytes_; }
    // Called every few MiB sent, so progress can be published while a round runs.
    void on_progress(std::function<void()> fn) { progress_ = std::move(fn); }
    // Asked before each piece (at most 4 MiB): once it says stop, the round under way ends
    // there (its end still goes, so the destination and the channel close it as any round),
    // and what it had still to send is kept in unsent(). A switch to postcopy does this: it
    // comes within a piece of migrate_start_postcopy, as QEMU's does, not a whole round later.
    void stop_when(std::function<bool()> fn) { stop_ = std::move(fn); }
    // Whether the last round stopped early, and per block the pages it did not send then
    // (never-populated pages of the bulk round are not among them: there is nothing to send).
    bool cut_short() const { return stopped_; }
    const std::vector<std::vector<uint64_t>>& unsent() const { return unsent_; }
    // A precopy resumed over a new connection (resume.h): the rounds go on on its stream and
    // RAM channel (a resumable one: SourceRamChannel::resumable, or none: inline), verified as
    // `verify` says for it, the counts carry on. Called while the broken connection still exists
    // (its channel is let go here).
    void rebind(stream::ByteStream& stream, SourceRamChannel* channel, Verify verify);
    // A channel round ends when the destination says it landed (ROUND_CHECKED,
    // kFeatureRoundLanded), with sums or without; set as the header said it.
    void wait_for_landing(bool on) { wait_landed_ = on; }

private:
    void listen_to_channel();  // its arrivals move the figures
    Status begin(uint32_t round);
    Status end(uint32_t round);
    Status send_run(uint32_t block, uint64_t first_page, uint64_t count);
    Status send_data(uint32_t block, uint64_t first_page, uint64_t count);
    Status send_zero(uint32_t block, uint64_t first_page, uint64_t count);
    struct Pages {
        uint64_t data, zero;  // pages a record carries as data / marks as zero
    };
    // A record header, and the guest RAM it carries (sent by write_ram: maybe without a copy),
    // paced by the rate limit before it goes and counted once it went.
    Status record(const std::vector<uint8_t>& header, std::span<const uint8_t> ram = {}, Pages pages = {0, 0});
    void account(Pages pages);    // normal, duplicate and remaining for pages that went
    void sent(uint64_t bytes);    // counts bytes sent and arrived, reports progress
    void count_arrived();         // transferred and in_flight, from the channel's word
    void done_pages(uint64_t n);  // n pages of this round are sent or passed: `remaining` drops
    void skipped(uint64_t n);     // n never-populated pages passed in the bulk round
    // Whether the round stops at this run; if so [first, first + count) of `block` joins unsent().
    bool stop_at(uint32_t block, uint64_t first, uint64_t count);

    const memory::GuestMemory& mem_;
    stream::ByteStream* stream_;
    SourceRamChannel* channel_;
    RateLimiter& limiter_;
    bool zero_markers_;
    RamStats& stats_;
    Verify verify_;
    bool wait_landed_ = false;
    PageSummer summer_;  // the channel's sums: XXH3, or keyed MACs on an authenticated connection
    uint64_t zero_sum_;  // summer_ of a zero page
    struct Sums {
        uint32_t block;
        uint64_t offset;
        std::vector<uint64_t> sums;  // one per page from `offset`
    };
    std::vector<Sums> round_sums_;  // this round's, for a channel (Verify::round_sums)
    uint32_t round_ = 0;
    Status sum_for_channel(uint32_t block, uint64_t first_page, uint64_t count, bool zero);
    // The saver sums what it hands the channel (kept for SUMS records, or carried by the channel).
    bool sums_for_channel() const { return verify_ == Verify::round_sums || verify_ == Verify::channel_sums; }
    Status send_round_sums();
    uint64_t bytes_ = 0;
    uint64_t pages_per_piece();
    uint64_t last_progress_ = 0;
    std::chrono::steady_clock::time_point last_progress_at_;
    std::function<void()> progress_;
    std::function<bool()> stop_;
    bool stopped_ = false;
    std::vector<std::vector<uint64_t>> unsent_;  // per block, one bit a page (the stopped round's)
};

}  // namespace vmm::migration

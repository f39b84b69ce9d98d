// Postcopy over RDMA (kCapPostcopy; the wire is proto/postcopy_wire.h, the why
// docs/rdma-protocol.md "Postcopy"): both halves of the postcopy channel, the queue pair the
// source connects after its lanes when postcopy-ram is on at both ends. Its receives complete
// in a CQ of their own, so that one thread waits on each direction:
//   source: the return-path thread reads requests and credit (next()) and writes each answer
//     into the destination's request slot (send() with an answer, VMM_RAM_PC_ANSWERS); the
//     migration thread writes the push into its push slots (send(), end());
//   destination: the fault thread asks for pages (request()); the receiving thread takes what
//     landed (next()), and once the page is placed gives its slot back (release()). With
//     kCapPostcopyRead the fault thread reads a page whose region the source told (KEYS) by
//     RDMA READ into a request slot instead of asking, and next() hands it over once read: the
//     receiving thread then waits on both CQs (a READ completes in the send CQ) and is the
//     only one to wait for the send CQ's events; others take what completed, under cq_mutex_.
// Every slot, block, offset and count from the peer is checked before it is used. On an
// authenticated connection (kCapTls) every message and write also carries its tag
// (proto/postcopy_auth.h), checked before anything is done with it; the destination checks a
// write's tag on a private copy of its slot, and that copy is what is placed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "endpoint.h"
#include "proto/chunks.h"
#include "proto/postcopy_auth.h"
#include "proto/pull_plan.h"
#include "proto/postcopy_wire.h"
#include "vmm/common/fd.h"
#include "vmm/common/latency.h"
#include "vmm/common/mapping.h"

namespace rdma_migrate {

// Waits on `ep`'s send CQ, or its receive CQ (`receives`, a split shape), handing each
// successful completion to on_wc until done(); a failed or flushed completion or a cancel ends
// it with an error. Returns false when `timeout_ms` passes first (-1: x-io-timeout, an error).
// Not Endpoint::progress: that one serves one thread on a whole CQ and reads CM events too (a
// flush there waits to learn why); here two threads each wait on one half of a split CQ, a
// flush is the link failing (postcopy-paused), and a thread may stop after any completion.
// Both arm their CQ again through rearm_cq (verbs.h).
Result<bool> wait_cq(Endpoint& ep, bool receives, const std::function<Status(const ibv_wc&)>& on_wc,
                     const std::function<bool()>& done, int timeout_ms = -1);
// wait_cq's two halves. take_completions: hands on_wc what has completed, until done() (true) or
// none is left (false); it never blocks. await_cq_event: waits for the CQ's next event and arms
// it again (true), or `deadline` passes (false); the caller then takes what completed.
Result<bool> take_completions(Endpoint& ep, bool receives, const std::function<Status(const ibv_wc&)>& on_wc,
                              const std::function<bool()>& done);
Result<bool> await_cq_event(Endpoint& ep, bool receives, std::chrono::steady_clock::time_point deadline);
// Waits for an event on either CQ of `ep`'s split shape, and arms what fired again (true), or
// `deadline` passes (false).
Result<bool> await_either_cq(Endpoint& ep, std::chrono::steady_clock::time_point deadline, int wake_fd = -1);
// What a wait that hears nothing for x-io-timeout says.
Error silent(const Endpoint& ep);

// SEND buffers of kPcSealedSize bytes (a message and, on an authenticated channel, its tag),
// `count` of them in one registered area.
class MessageBuffers {
public:
    Status init(const MemoryRegistry& registry, size_t count, Use use, const char* what);
    uint8_t* at(size_t i) const { return area_.data() + i * kPcSealedSize; }
    ibv_sge sge(size_t i, uint32_t length = kPcSealedSize) const {
        return {reinterpret_cast<uint64_t>(at(i)), length, mr_->lkey};
    }
    size_t count() const { return count_; }

private:
    vmm::Mapping area_;
    MemoryRegion mr_;
    size_t count_ = 0;
};

constexpr uint32_t kPcRequestSlots = 32;  // a destination's requests in flight at once
constexpr uint32_t kPcPushSlots = 32;     // the background push's ring
constexpr uint32_t kPcSourceReceives = kPcRequestSlots + 32;  // requests, credit and DONE
constexpr uint32_t kPcPullSlots = 4;  // kCapPostcopyReadPush: the destination's own push READs in flight

// kCapPostcopyRead: how the source exposes its RAM to the destination's READs. It registers it
// a region at a time, each before a push write, and tells the destination in a KEYS write, so
// the switch waits for none of it and a fault in a region not yet told is asked for as before.
// With kCapPostcopyReadPush its push writes no page of a region told: it names those runs in
// PULL writes, with the pace (`pull_rate`) the destination reads them at.
struct ReadExposure {
    bool on = false;
    uint64_t pin_limit = 0;  // rdma-pin-limit: regions stop there (the rest is asked for); 0: all
    bool push = false;       // kCapPostcopyReadPush: the destination reads the push too
    uint64_t pull_rate = 0;  // ... at this many bytes/s (max-postcopy-bandwidth; 0: unlimited)
};
constexpr uint64_t kPcReadRegion = 64ull << 20;

class PostcopySource {
public:
    struct Request {
        bool done = false;  // DONE: every page is placed at the destination
        uint32_t block = 0, slot = 0;
        uint64_t offset = 0;
        uint32_t held = 0;  // HAVE: not a request; the destination holds this many pages from offset
    };
    // `keys`: an authenticated connection's (Connection::postcopy_keys), else none.
    PostcopySource(Endpoint& ep, std::vector<LocalBlock> blocks, std::optional<PcKeys> keys, ReadExposure reads = {})
        : ep_(ep), blocks_(std::move(blocks)), keys_(std::move(keys)), reads_(reads), exposing_(reads.on) {}
    // Before connecting: the receives for the destination's messages.
    Status post_receives();
    // Once, after the switch: the destination's HELLO, and this side's staging slots.
    Status begin();
    // The return-path thread: the next request (or DONE, or HAVE), or nullopt after `wait_ms` without one.
    Result<std::optional<Request>> next(int wait_ms);
    // `pages` pages of `block` from `offset` (zero: a zero run), with their sums under
    // verify-ram; `answer` is the slot of the request they answer (the return-path thread's, or
    // the migration thread's), else a push (the migration thread's). One answer and one push may
    // run at once: they take turns only to post and to reap write completions. Returns false
    // for a push that was not sent: the destination reads those pages itself (ReadExposure::push).
    Result<bool> send(uint32_t block, uint64_t offset, uint32_t pages, bool zero, std::span<const uint64_t> sums,
                      std::optional<uint32_t> answer);
    Status end();  // the migration thread, every page gone and no answer under way: END

private:
    Status take_message(const ibv_wc& wc, std::optional<Request>& out);
    Status repost(size_t i);
    Status wait_staging(std::unique_lock<std::mutex>& writer, uint32_t slot);
    Status write_done(const ibv_wc& wc);
    Status await_push_credit();
    Result<uint32_t> take_push_slot();
    Status post_write(uint32_t slot, uint32_t length, uint32_t imm);
    Status expose_next_region();  // the migration thread's, before a push: kCapPostcopyRead
    std::optional<PcRegion> expose_run(uint32_t block, uint64_t offset, uint64_t length);
    void log_exposed(const char* what) const;  // how much of RAM was registered for READ, and why no more
    Status write_keys(std::span<const PcRegion> regions);  // at most kPcMaxRegions
    bool told(uint32_t block, uint64_t offset, uint32_t pages) const;  // inside a region a KEYS told
    Status hold_back(uint32_t block, uint64_t offset, uint32_t pages);  // ReadExposure::push
    Status flush_pulls();
    Status tag_region(PcRegion& r);  // authenticated: the region's page tags, exposed

    Endpoint& ep_;
    std::vector<LocalBlock> blocks_;
    // Authenticated: `messages` checks what the destination sends (the return-path thread's, and
    // HELLO's before it), `writes` tags each write (under write_mutex_, in the order they are posted).
    std::optional<PcKeys> keys_;
    MessageBuffers receives_;
    PcMessage hello_;
    vmm::Mapping staging_;  // a local slot per remote one, the pages copied in with their trailer
    MemoryRegion staging_mr_;
    // One writer at a time on the send queue and its CQ: the staging slot's state (writing_),
    // the post, and the completions taken while waiting for a slot (wait_staging).
    std::mutex write_mutex_;
    std::condition_variable writes_cv_;
    bool polling_ = false;       // a writer waits for the send CQ's event (under write_mutex_)
    std::vector<bool> writing_;  // per slot: its last write not yet complete (under write_mutex_)
    uint64_t pushed_ = 0;        // push writes posted
    std::mutex mutex_;
    std::condition_variable cv_;
    uint64_t credit_ = 0;  // push slots the destination has consumed (under mutex_)
    bool failed_ = false;  // the return path ended: no more credit will come (under mutex_)
    std::map<uint32_t, std::pair<uint32_t, uint64_t>> asked_;  // request slot -> block, offset (under mutex_)
    // kCapPostcopyRead (the migration thread's): the regions registered for the destination's
    // READs, and where the next one begins.
    ReadExposure reads_;
    bool exposing_ = false;
    std::vector<vmm::Mapping> tag_tables_;  // authenticated: each region's page tags
    std::vector<MemoryRegion> read_mrs_;    // the regions' (and their tag tables'): deregistered first
    std::vector<std::map<uint64_t, uint64_t>> told_;  // per block, the regions told: offset -> length
    // ReadExposure::push (the migration thread's): the runs held back not yet in a PULL, since when.
    static constexpr std::chrono::milliseconds kPullWait{5};
    std::vector<PcPullRun> pulls_out_;
    std::chrono::steady_clock::time_point pulls_since_;
    uint64_t held_back_ = 0;
    size_t expose_block_ = 0;
    uint64_t expose_offset_ = 0, exposed_ = 0;
};

class PostcopyDestination {
public:
    struct Arrival {
        PcKind kind = PcKind::end;
        uint32_t block = 0, pages = 0, slot = 0;
        uint64_t offset = 0;
        // The pages, in their slot, or on an authenticated channel in the slot's private copy,
        // where the tag was checked (valid until release).
        const uint8_t* data = nullptr;
        std::vector<uint64_t> sums;     // verify-ram's, when the source sent them
    };
    // `reads`: kCapPostcopyRead was agreed; `pulls`: kCapPostcopyReadPush too; `fetch_wait`: how
    // long fetch() polls for its READ at most (x-rdma-postcopy-read-wait; 0: it only asks).
    PostcopyDestination(Endpoint& ep, std::vector<LocalBlock> blocks, std::optional<PcKeys> keys, bool reads = false,
                        bool pulls = false, std::chrono::microseconds fetch_wait = std::chrono::microseconds(1000))
        : ep_(ep), blocks_(std::move(blocks)), keys_(std::move(keys)), reads_(reads), pulls_(reads && pulls),
          fetch_wait_(fetch_wait) {}
    // Before accepting: the receives the source's writes complete.
    Status post_receives();
    // Before the guest runs: registers the landing area and sends HELLO.
    Status begin();
    // The fault thread: asks for the page at `offset` in `block`.
    Status request(uint32_t block, uint64_t offset);
    // The fault thread, as request(); where the page comes by a READ of its own, that READ is
    // awaited here by polling, for about what READs take, and returned checked (the caller places
    // it, then release()). nullopt: the page comes through next(). A failure here is next()'s too.
    Result<std::optional<Arrival>> fetch(uint32_t block, uint64_t offset);
    // The receiving thread: the next write that landed, checked, or READ that completed.
    Result<Arrival> next();
    // Once the arrival's pages are placed (the receiving thread's, or the fault thread's from
    // fetch()): its slot is free again (and so is any request slot that waited for one of these pages).
    Status release(const Arrival& a);
    Status done();  // every page is placed: DONE
    // What a second queue pair on this side's PD needs to write into a landing slot: its
    // address, and the area's rkey (the hostile-peer tests play such a forger).
    uint64_t landing_slot(uint32_t slot) const { return reinterpret_cast<uint64_t>(landing_.data()) + slot * kPcSlotSize; }
    uint32_t landing_rkey() const { return landing_mr_ ? landing_mr_->rkey : 0; }
    // kCapPostcopyRead: where the source told the page at `offset` of `block` may be read, if it
    // did; and the channel's endpoint (the hostile-peer tests aim READs of their own by them).
    struct Remote {
        uint64_t address = 0;
        uint32_t rkey = 0;
        uint64_t room = 0;  // bytes of the region from there on
        uint64_t tags = 0;  // authenticated: where the page's tag is (0: none)
        uint32_t tag_rkey = 0;
        Remote after(uint64_t pages) const {  // the same region, `pages` pages on
            return {address + pages * kPcPage, rkey, room - pages * kPcPage, tags == 0 ? 0 : tags + pages * kPcTagSize,
                    tag_rkey};
        }
    };
    std::optional<Remote> readable(uint32_t block, uint64_t offset);
    Endpoint& endpoint() { return ep_; }

    // How many faults were read by RDMA READ (READs posted: with readahead's), and how many asked for.
    uint64_t reads() const { return faults_read_; }
    uint64_t reads_posted() const { return reads_posted_; }
    uint64_t asks() const { return asks_; }
    // kCapPostcopyReadPush: pages this side read for its own push, and in how many READs.
    uint64_t pulled_pages() const { return pulled_pages_; }
    uint64_t pull_reads() const { return pull_reads_; }

private:
    Status send_message(const PcMessage& m);
    Status await_sends(uint64_t in_flight);
    Status await_sends_beside_reads(uint64_t in_flight);
    Result<Arrival> next_with_reads();
    Result<Arrival> arrival(const ibv_wc& wc);
    Status take_keys(const PcImmediate& imm, const uint8_t* slot);
    // `claim`: the fault thread awaits this READ itself (fetch()).
    Status post_read(uint32_t slot, const Remote& from, uint32_t pages, bool claim = false);
    Result<std::optional<uint32_t>> ask(uint32_t block, uint64_t offset, bool claim);
    Result<std::optional<uint32_t>> read(std::unique_lock<std::mutex>& lock, uint32_t block, uint64_t offset,
                                         const Remote& from, bool claim);
    bool read_under_way(uint32_t block, uint64_t offset) const;
    std::optional<uint32_t> free_request_slot() const;  // under slots_mutex_
    uint32_t readahead(uint32_t block, uint64_t offset, const Remote& from);  // under slots_mutex_
    Result<std::optional<uint32_t>> take_sends();  // under cq_mutex_
    Status poll_sends();                            // under cq_mutex_
    Error failed_fetch(Error why);
    std::chrono::microseconds fetch_budget() const;  // under cq_mutex_
    Result<Arrival> read_arrival(uint32_t slot, PcPageTags* tags);  // tags: authenticated, whose checker
    const uint8_t* slot_contents(const PcImmediate& imm);
    Status check_tag(const PcImmediate& imm, const PcTrailer& t, const uint8_t* slot, uint64_t at);
    Status check_answer(const Arrival& a);
    bool free_request_slots(const Arrival& a);  // whether `a` was a READ's
    void free_asked(uint32_t block, uint64_t offset, uint64_t pages);
    void free_asked_locked(uint32_t block, uint64_t offset, uint64_t pages);  // under slots_mutex_
    Status note_held(const Arrival& a);
    Status flush_held();
    // kCapPostcopyReadPush (the receiving thread's): the pieces a KEYS's regions lack here, their
    // READs posted as the pace allows, and END held back until the last is placed.
    struct Pull {
        uint32_t block = 0, pages = 0;
        uint64_t offset = 0;
        Remote from;
    };
    Status take_pulls(const PcImmediate& imm, const uint8_t* slot);
    void trim_front_pull();
    Status post_pulls();
    bool pulling() const;  // a piece queued or in flight
    void log_pulled() const;
    std::chrono::steady_clock::time_point next_pull_at() const;
    static bool is_pull_slot(uint32_t slot) { return slot >= kPcRequestSlots + kPcPushSlots; }
    static uint32_t pull_slot(size_t i) { return static_cast<uint32_t>(kPcRequestSlots + kPcPushSlots + i); }

    Endpoint& ep_;
    std::vector<LocalBlock> blocks_;
    // Authenticated: `messages` tags what this side sends (under send_mutex_), `writes` checks
    // each write (the receiving thread's, in the order they land).
    std::optional<PcKeys> keys_;
    vmm::Mapping landing_;
    MemoryRegion landing_mr_;
    vmm::Mapping copies_;  // authenticated: each slot's private copy, which no peer can write
    uint64_t consumed_ = 0;      // push slots placed (the receiving thread's)
    uint64_t credited_ = 0;      // ... and told to the source
    std::mutex send_mutex_;      // the fault thread's requests and the receiving thread's messages
    MessageBuffers sends_;
    size_t next_send_ = 0;
    uint64_t sends_posted_ = 0;
    std::atomic<uint64_t> sends_done_ = 0;  // the fault thread's, or under cq_mutex_ with reads
    std::mutex slots_mutex_;
    std::condition_variable slots_cv_;
    std::vector<std::optional<std::pair<uint32_t, uint64_t>>> asked_;  // request slot -> block, offset
    std::vector<bool> reading_;  // request slot: its page comes by READ, and only that frees it
    std::vector<uint32_t> read_pages_;  // request slot: how many pages its READ reads
    // READ's readahead (under slots_mutex_): a fault just past the last READs' pages reads twice
    // as many as they did (up to a slot's kPcMaxPages in all), any other one page.
    uint32_t last_block_ = 0, run_ = 1;
    uint64_t last_end_ = UINT64_MAX;
    // The run of pages read and placed not yet told to the source (HAVE; the receiving thread's).
    struct Held {
        uint32_t block = 0, pages = 0;
        uint64_t offset = 0;
    } held_;
    std::mutex held_mutex_;  // held_: the receiving thread's releases and the fault thread's
    // kCapPostcopyRead.
    bool reads_ = false;
    std::mutex regions_mutex_;  // the receiving thread adds (KEYS), the fault thread looks up
    std::vector<std::map<uint64_t, PcRegion>> regions_;  // per block, by offset
    uint64_t region_count_ = 0;
    std::mutex cq_mutex_;  // the send CQ's completions are taken under it, by any thread
    std::condition_variable cq_cv_;
    std::deque<uint32_t> read_done_;  // request slots whose READ completed (under cq_mutex_)
    // A READ's time from post to completion, smoothed (under cq_mutex_), and when each slot's
    // was posted: the receiving thread polls for an expected READ about that long before it
    // sleeps (a wake-up costs more than a READ takes).
    std::vector<std::chrono::steady_clock::time_point> read_posted_at_;
    double read_us_ = 0;
    std::atomic<uint32_t> reads_in_flight_ = 0;  // faults' (and their readahead's), not the pulls'
    // fetch(), under cq_mutex_: the slot whose READ the fault thread awaits (the receiving thread
    // leaves its completion alone), and the first failure on the send CQ or of a fetch, which
    // both threads then fail with; `wake_` (an eventfd) wakes the receiving thread to it.
    std::optional<uint32_t> fetching_;
    std::optional<Error> cq_failure_;
    vmm::UniqueFd wake_;
    std::optional<PcPageTags> fetch_tags_;  // authenticated: the fault thread's own checker
    // fetch()'s READs taken on the fault thread, each timed from post to completion seen (under
    // cq_mutex_), and those left to the receiving thread, for done()'s line.
    std::atomic<uint64_t> fetched_late_ = 0;
    vmm::LatencySamples fetch_waits_;
    std::chrono::microseconds spin_budget();
    std::atomic<uint64_t> faults_read_ = 0, reads_posted_ = 0, asks_ = 0;
    // kCapPostcopyReadPush (the receiving thread's).
    bool pulls_ = false;
    std::deque<Pull> pull_queue_;
    std::vector<std::optional<Pull>> pulling_;  // per pull slot: the piece its READ brings
    PullPace pace_;
    bool end_held_ = false;  // END came while pieces were still to read
    uint64_t skipped_pages_ = 0;  // pages of PULL pieces placed by then: not read
    std::atomic<uint64_t> pulled_pages_ = 0, pull_reads_ = 0;
    std::chrono::microseconds fetch_wait_;  // x-rdma-postcopy-read-wait
};

}  // namespace rdma_migrate

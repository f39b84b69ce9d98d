// PostcopyReceiver: the destination's postcopy phase. Before the guest runs here (prepare):
// guest RAM is registered with userfaultfd, the ranges the source discarded are dropped so that
// touching them faults, and the fault thread starts. After GO (run): the source's pages arrive
// on the stream, outside any round, and are placed atomically (UFFDIO_COPY / UFFDIO_ZEROPAGE)
// unless the page is present already, whichever of the background push and a request's answer
// comes first; at END every missing page must have arrived, and POSTCOPY_DONE tells the source.
// Requests and POSTCOPY_DONE go back on the stream's reverse direction (one writer at a time).
// A broken link leaves every page's state here: resume() carries on over a new stream.
// Over a transport with its own postcopy channel (transport.h: RDMA) requests go there and
// pages come from there, each placed from where it landed; the stream carries only the start.
// With postcopy-preempt the answers to requests come on a second connection, read and placed
// by a thread of its own until its END, while this thread places the push.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "vmm/memory/guest_memory.h"
#include "vmm/migration/postcopy/fault_handler.h"
#include "vmm/migration/postcopy/missing_pages.h"
#include "vmm/migration/postcopy/userfault.h"
#include "vmm/migration/core/stats.h"
#include "vmm/migration/transport/stream.h"
#include "vmm/migration/transport/transport.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

class PostcopyReceiver {
public:
    // `blocks`: this machine's layout (checked against the source's header); `verify`: the
    // source announced verify-ram, so pages come as PAGES_SUMMED and are checked before placing.
    PostcopyReceiver(const memory::GuestMemory& mem, ByteStream& stream, DestPostcopyChannel* channel,
                     std::vector<BlockInfo> blocks, std::vector<uint32_t> vcpu_tids, bool verify);
    ~PostcopyReceiver();  // stops the fault thread; the userfaultfd goes last
    PostcopyReceiver(const PostcopyReceiver&) = delete;
    PostcopyReceiver& operator=(const PostcopyReceiver&) = delete;

    // Before READY: `discards` are the source's DISCARD records (already checked against the blocks).
    Status prepare(const std::vector<Record>& discards);
    // postcopy-preempt: before run(), the connection the requested pages come on, and how to
    // cut it (run() does when it ends early, so that the thread reading it stops). Its END may
    // lag the main connection's by at most `end_within` (x-io-timeout).
    void use_preempt(ByteStream* preempt, std::function<void()> cut,
                     std::chrono::milliseconds end_within = std::chrono::seconds(30));
    // After GO: places pages until END, then answers POSTCOPY_DONE.
    Status run();
    PostcopyStats stats() const;
    // Every page is here: stops the fault thread and lets go of guest RAM (no fault can come).
    void close();
    // The stream is going away: requests fail from now on (a later recovery brings another).
    void detach();
    // A recovery: tells the source over `stream` which pages are here (recovery.h), then sends
    // it every request still unanswered; run() then carries on reading `stream`.
    Status resume(ByteStream& stream, DestPostcopyChannel* channel, ByteStream* preempt = nullptr,
                  std::function<void()> cut = {}, std::chrono::milliseconds end_within = std::chrono::seconds(30));
    // Writes on the stream's reverse direction under the lock the fault thread's requests take:
    // READY at the switch goes here, as a fault may already have asked for a page.
    Status send(std::span<const uint8_t> bytes);
    // Whether every page has arrived (the guest no longer depends on the source).
    bool complete() const { return missing_ && missing_->remaining() == 0; }

private:
    Status place_pages(ByteStream& in, const Record& r, std::vector<uint8_t>& buffer);
    Status place_zero(const Record& r);
    Status place_record(ByteStream& in, const Record& r, std::vector<uint8_t>& buffer);  // PAGES, PAGES_SUMMED, ZERO
    Status run_stream();
    void read_preempt();    // the preempt connection's thread: places its pages until its END
    // Joins it, having cut its connection first when `cut` (run() ends early); its failure, or
    // an error if it ended without its END.
    Status join_preempt(bool cut);
    std::optional<Error> preempt_failure();
    void note_placed(uint32_t block, uint64_t first_page, uint64_t count, uint64_t placed);
    Status send_locked(std::span<const uint8_t> bytes);  // under write_mutex_
    Status request(uint32_t block, uint64_t offset);  // the fault thread's
    Status run_channel();                               // run() over a postcopy channel
    Status place_arrival(const PostcopyPages& p);
    Status check_sums(uint32_t block, uint64_t offset, const uint8_t* data, std::span<const uint64_t> sums) const;

    const memory::GuestMemory& mem_;
    ByteStream* stream_;  // replaced only while detached (between run()s)
    DestPostcopyChannel* channel_;  // or null (as stream_)
    std::vector<BlockInfo> blocks_;
    std::vector<uint32_t> vcpu_tids_;
    bool verify_;
    std::mutex write_mutex_;
    bool attached_ = true;  // under write_mutex_
    std::unique_ptr<Userfault> uffd_;
    std::unique_ptr<MissingPages> missing_;
    std::unique_ptr<FaultHandler> faults_;
    std::vector<uint8_t> buffer_;
    ByteStream* preempt_ = nullptr;  // postcopy-preempt's connection, or none (as stream_)
    std::function<void()> cut_preempt_;
    std::thread preempt_thread_;
    std::chrono::milliseconds preempt_end_within_{30000};
    std::mutex preempt_mutex_;
    std::condition_variable preempt_cv_;    // the thread is done: its END came, or it failed
    std::optional<Error> preempt_failure_;  // under preempt_mutex_
    bool preempt_ended_ = false;            // its END came (under preempt_mutex_)
    mutable std::mutex stats_mutex_;
    uint64_t background_ = 0;  // pages placed from the stream (pushed or requested)
    uint64_t bytes_ = 0;
    uint64_t recoveries_ = 0;
    uint64_t preempt_pages_ = 0;
};

}  // namespace vmm::migration

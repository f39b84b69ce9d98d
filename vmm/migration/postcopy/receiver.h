// PostcopyReceiver: the destination's postcopy phase. Before the guest runs here (prepare):
// guest RAM is registered with userfaultfd, the ranges the source discarded are dropped so that
// touching them faults, and the fault thread starts. After GO (run): the source's pages arrive
// on a DestPostcopyLink (transport/postcopy_link.h: the stream, or a transport's own channel),
// outside any round, and are placed atomically (UFFDIO_COPY / UFFDIO_ZEROPAGE) unless the page
// is present already, whichever of the background push and a request's answer comes first; at
// END every missing page must have arrived, and the link tells the source. Requests and the
// end go back one writer at a time. Where the link brings the answers to requests on a lane of
// their own (postcopy-preempt), a thread of its own places them until that lane's END, while
// this thread places the push. A broken link leaves every page's state here: resume() carries
// on over a new one.
#pragma once

#include <chrono>
#include <condition_variable>
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
#include "vmm/migration/transport/postcopy_link.h"
#include "vmm/stream/byte_stream.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

class PostcopyReceiver {
public:
    // `blocks`: this machine's layout (checked against the source's header); `verify`: the
    // source announced verify-ram, so pages come as PAGES_SUMMED and are checked before placing.
    // `stream` carries the start (READY) and a recovery's report; `link` the pages. The answers'
    // lane's END may lag the main one's by at most `end_within` (x-io-timeout).
    PostcopyReceiver(const memory::GuestMemory& mem, stream::ByteStream& stream, std::unique_ptr<DestPostcopyLink> link,
                     std::vector<BlockInfo> blocks, std::vector<uint32_t> vcpu_tids, bool verify,
                     std::chrono::milliseconds end_within = std::chrono::seconds(30));
    ~PostcopyReceiver();  // stops the fault thread; the userfaultfd goes last
    PostcopyReceiver(const PostcopyReceiver&) = delete;
    PostcopyReceiver& operator=(const PostcopyReceiver&) = delete;

    // Before READY: `discards` are the source's DISCARD records (already checked against the blocks).
    Status prepare(const std::vector<Record>& discards);
    // After GO: places pages until END, then answers POSTCOPY_DONE.
    Status run();
    PostcopyStats stats() const;
    // Every page is here: stops the fault thread and lets go of guest RAM (no fault can come).
    void close();
    // The link is going away (after run()): requests fail from now on (a later recovery brings another).
    void detach();
    // A recovery: tells the source over `stream` which pages are here (recovery.h), then sends
    // it every request still unanswered; run() then carries on reading `link`.
    Status resume(stream::ByteStream& stream, std::unique_ptr<DestPostcopyLink> link, std::chrono::milliseconds end_within);
    // Writes on the stream's reverse direction under the lock the fault thread's requests take:
    // READY at the switch goes here, as a fault may already have asked for a page.
    Status send(std::span<const uint8_t> bytes);
    // Whether every page has arrived (the guest no longer depends on the source).
    bool complete() const { return missing_ && missing_->remaining() == 0; }

private:
    using Lane = DestPostcopyLink::Lane;
    Status run_main();
    void read_answers();  // the answers' lane's thread: places its pages until its END
    // Joins it, having cut its lane first when `cut` (run() ends early); its failure, or an
    // error if it ended without its END.
    Status join_answers(bool cut);
    std::optional<Error> answers_failure();
    Status send_locked(std::span<const uint8_t> bytes);  // under write_mutex_
    Status request(uint32_t block, uint64_t offset);  // the fault thread's
    void note_placed(uint32_t block, uint64_t first_page, uint64_t count, uint64_t placed);
    // Places pages from where they arrived, then releases them to the link.
    Status place(const PostcopyPages& p);
    Status check_sums(uint32_t block, uint64_t offset, const uint8_t* data, std::span<const uint64_t> sums) const;

    const memory::GuestMemory& mem_;
    stream::ByteStream* stream_;  // replaced only while detached (between run()s), as link_
    std::unique_ptr<DestPostcopyLink> link_;
    std::vector<BlockInfo> blocks_;
    std::vector<uint32_t> vcpu_tids_;
    bool verify_;
    std::chrono::milliseconds end_within_;
    std::mutex write_mutex_;
    bool attached_ = true;  // under write_mutex_
    std::unique_ptr<Userfault> uffd_;
    std::unique_ptr<MissingPages> missing_;
    std::unique_ptr<FaultHandler> faults_;
    std::thread answers_thread_;
    std::mutex answers_mutex_;
    std::condition_variable answers_cv_;    // the thread is done: its END came, or it failed
    std::optional<Error> answers_failure_;  // under answers_mutex_
    bool answers_ended_ = false;            // its END came (under answers_mutex_)
    mutable std::mutex stats_mutex_;
    uint64_t background_ = 0;  // pages placed (pushed or requested)
    uint64_t bytes_ = 0;
    uint64_t recoveries_ = 0;
    uint64_t preempt_pages_ = 0;  // of them, from the answers' lane
};

}  // namespace vmm::migration

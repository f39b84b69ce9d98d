// PostcopySender: the source's postcopy phase. The guest runs on the destination; this side
// holds the only copy of the pages the destination lacks (`missing`, the dirty bitmaps taken at
// the switch) and sends each once: requested pages first, ahead of the background push, which
// then carries on from just past the request (the guest tends to touch its neighbours next).
// A thread reads the return path (PAGE_REQUEST, POSTCOPY_DONE). The background push is paced
// by max-postcopy-bandwidth; requests never are. After requests in order it sends a readahead
// window at once (readahead.h), accounted to the cap. When every page has gone it sends END and
// waits for POSTCOPY_DONE. When the link breaks, run() fails and the sender keeps every page's
// state: detach() lets go of the dead stream, resume() carries on over a new one from what the
// destination says it holds (recovery.h). Everything travels on a SourcePostcopyLink
// (transport/postcopy_link.h), which says how requests are answered: by the push's thread
// between its runs, or at once by the thread that reads them (beside_push), on a connection of
// their own (postcopy-preempt: a requested page the push has sent already goes there once more,
// since its first copy may still queue behind the push) or on a channel that takes each page
// only once (RDMA: a page is taken off what is missing as a thread picks it).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "vmm/memory/guest_memory.h"
#include "vmm/migration/postcopy/readahead.h"
#include "vmm/migration/core/live_settings.h"
#include "vmm/migration/core/rate_limiter.h"
#include "vmm/migration/core/stats.h"
#include "vmm/stream/cancel.h"
#include "vmm/migration/transport/postcopy_link.h"
#include "vmm/migration/wire/return_path.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

class PostcopySender {
public:
    struct Config {
        bool zero_markers = true;  // zero pages as ZERO records
    };
    // `missing[i]`: block i's pages the destination lacks (bit per page). `live` gives the
    // push's cap (max-postcopy-bandwidth, read before each run) and the readahead window's
    // maximum (x-postcopy-readahead, read at each request): a change applies at once.
    PostcopySender(const memory::GuestMemory& mem, std::unique_ptr<SourcePostcopyLink> link, std::vector<BlockInfo> blocks,
                   std::vector<std::vector<uint64_t>> missing, const stream::CancelToken& cancel, const LiveSettings& live,
                   Config config);
    ~PostcopySender();  // joins the return-path reader
    PostcopySender(const PostcopySender&) = delete;
    PostcopySender& operator=(const PostcopySender&) = delete;

    // Sends every missing page, then END, and returns once the destination said POSTCOPY_DONE.
    Status run();
    PostcopyStats stats() const;
    uint64_t remaining_pages() const;
    // After run() failed: stops reading the old link and lets go of it (its connection may
    // then be destroyed).
    void detach();
    // Carries on over `link`: `received[b]` holds block b's pages the destination has; every
    // page it had to get at the switch and does not hold is missing again.
    void resume(std::unique_ptr<SourcePostcopyLink> link, const std::vector<std::vector<uint64_t>>& received);

private:
    Status run_once();  // run(), its process CPU time counted
    using Path = SourcePostcopyLink::Path;
    struct Request {
        uint32_t block;
        uint64_t first_page, count;
        std::optional<uint32_t> token;  // the link's
        std::chrono::steady_clock::time_point arrived{};  // read off the return path
    };
    void read_requests();  // the return-path thread
    // The return path's thread: answers `r` on Path::answer (nothing once END went).
    Status answer(const Request& r);
    std::optional<Request> next_request();
    struct Run {
        uint32_t block = 0;
        uint64_t first = 0, count = 0;
    };
    std::optional<Run> next_push_run();  // under mutex_
    // Sends `r`'s missing pages on `path`; with `resend`, pages all sent already go once
    // more. The push then goes on from past them.
    Status serve(Path path, const Request& r, bool resend);
    void served(const Request& r, bool any, bool again);
    Status push_background();
    // The next run of `block`'s missing pages in [from, end) (taken, when claims()).
    Run next_missing(uint32_t block, uint64_t from, uint64_t end);
    // Over a link that takes each page once (answers().once), a page is taken off what is
    // missing as one thread picks it, before it goes: the other thread never sends it too.
    // (On a stream, a second copy is placed or found present: pages are taken once they have gone.)
    bool claims() const { return answers_.once; }
    void take(uint32_t block, uint64_t first, uint64_t count);  // under mutex_: missing no more
    Status hold(const PostcopyRequest& r);                      // under mutex_: a HAVE's pages
    // Sends [first, first + count) of `block` on `path`: runs of data pages and of zero pages;
    // returns the bytes sent. `again`: pages sent already, sent once more; nothing about what
    // is missing changes.
    // `token`: the link's request these pages answer (its first run).
    Result<uint64_t> send_pages(Path path, uint32_t block, uint64_t first, uint64_t count, bool again = false,
                                std::optional<uint32_t> token = std::nullopt);
    Result<uint64_t> send_run(Path path, uint32_t block, uint64_t first, uint64_t count, bool zero, bool again,
                              std::optional<uint32_t> token);
    Status send_end();
    Status wait_done();

    const memory::GuestMemory& mem_;
    std::unique_ptr<SourcePostcopyLink> link_;  // replaced only while the reader is stopped
    SourcePostcopyLink::Answers answers_;       // link_->answers(), asked once per link
    bool begun_ = false;                        // link_->begin() went
    std::vector<BlockInfo> blocks_;
    const std::vector<std::vector<uint64_t>> at_switch_;  // what the destination lacked at the switch
    const stream::CancelToken& cancel_;
    const LiveSettings& live_;
    Config config_;
    RateLimiter limiter_;  // the push's thread's
    std::thread reader_;
    // The reader's answers and the END: one at a time, so that no answer follows the END.
    std::mutex answers_mutex_;
    bool answers_ended_ = false;  // under answers_mutex_: END went, so no answer may follow

    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<std::vector<uint64_t>> missing_;  // under mutex_, as everything below
    ReadaheadWindow readahead_;
    Run burst_;  // the readahead window: pages the push may send without waiting its turn
    uint32_t cursor_block_ = 0;
    uint64_t cursor_page_ = 0;
    uint64_t serves_ = 0;  // requests served: the push re-reads its cursor and window after one
    uint64_t pushed_held_ = 0;  // push pages the link held back: the destination fetches them itself
    std::deque<Request> requests_;
    bool done_ = false;         // POSTCOPY_DONE came
    bool stop_reader_ = false;
    std::optional<Error> failure_;  // the return path failed or carried nonsense
    PostcopyStats stats_;
    LatencySamples serve_latency_;  // requests whose pages went (or went again)
    uint64_t remaining_ = 0;
};

}  // namespace vmm::migration

// PostcopySender: the source's postcopy phase. The guest runs on the destination; this side
// holds the only copy of the pages the destination lacks (`missing`, the dirty bitmaps taken at
// the switch) and sends each once: requested pages first, ahead of the background push, which
// then carries on from just past the request (the guest tends to touch its neighbours next).
// A thread reads the return path (PAGE_REQUEST, POSTCOPY_DONE). The background push is paced
// by max-postcopy-bandwidth; requests never are. After requests in order it sends a readahead
// window at once (readahead.h), accounted to the cap. When every page has gone it sends END and
// waits for POSTCOPY_DONE. When the link breaks, run() fails and the sender keeps every page's
// state: detach() lets go of the dead stream, resume() carries on over a new one from what the
// destination says it holds (recovery.h). Over a transport with its own postcopy channel
// (transport.h: RDMA), requests, pages and the end travel there instead of on the stream.
// With postcopy-preempt (a second connection, transport.h), the thread that reads a request
// answers it there at once, so it waits neither for the push's thread nor behind what the push
// queued on the stream; a requested page the push has sent already goes there once more, since
// its first copy may still queue on the stream. Without it, the push's thread serves requests
// between its runs.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "vmm/memory/guest_memory.h"
#include "vmm/migration/postcopy/readahead.h"
#include "vmm/migration/core/rate_limiter.h"
#include "vmm/migration/core/stats.h"
#include "vmm/migration/transport/cancel.h"
#include "vmm/migration/transport/stream.h"
#include "vmm/migration/transport/transport.h"
#include "vmm/migration/wire/return_path.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

class PostcopySender {
public:
    struct Config {
        uint64_t max_bandwidth = 0;  // background push, bytes/s (0 = unlimited)
        bool zero_markers = true;    // zero pages as ZERO records
        bool verify = false;         // PAGES_SUMMED (verify-ram)
        uint64_t readahead_pages = 256;  // most the push sends at once past requests in order (readahead.h)
    };
    // `missing[i]`: block i's pages the destination lacks (bit per page).
    PostcopySender(const memory::GuestMemory& mem, ByteStream& stream, SourcePostcopyChannel* channel,
                   std::vector<BlockInfo> blocks, std::vector<std::vector<uint64_t>> missing, const CancelToken& cancel,
                   Config config);
    ~PostcopySender();  // joins the return-path reader
    PostcopySender(const PostcopySender&) = delete;
    PostcopySender& operator=(const PostcopySender&) = delete;

    // postcopy-preempt: requested pages go on `preempt` (null: on the stream). Before run().
    void use_preempt(ByteStream* preempt) { preempt_ = preempt; }
    // Sends every missing page, then END, and returns once the destination said POSTCOPY_DONE.
    Status run();
    PostcopyStats stats() const;
    // From any thread: the push goes at this cap (0 = unlimited) from its next run on.
    void set_max_bandwidth(uint64_t bytes_per_second) { limiter_.request_rate(bytes_per_second); }
    // From any thread: the readahead window's maximum from the next request on.
    void set_readahead(uint64_t pages);
    uint64_t remaining_pages() const;
    // After run() failed: stops reading the old stream, which may then be destroyed.
    void detach();
    // Carries on over `stream`: `received[b]` holds block b's pages the destination has; every
    // page it had to get at the switch and does not hold is missing again.
    void resume(ByteStream& stream, SourcePostcopyChannel* channel, ByteStream* preempt,
                const std::vector<std::vector<uint64_t>>& received);

private:
    struct Request {
        uint32_t block;
        uint64_t first_page, count;
        std::optional<uint32_t> token;  // the postcopy channel's
        std::chrono::steady_clock::time_point arrived{};  // read off the return path
    };
    // What the return path brings: a request, or DONE (every page is placed there).
    struct Incoming {
        bool done = false;
        Request request{};
    };
    void read_requests();  // the return-path thread
    // The next message from the stream's reverse direction or the postcopy channel; nothing
    // when none came within the poll interval.
    Result<std::optional<Incoming>> next_incoming();
    // The return path's thread answers requests itself: with postcopy-preempt over a stream, and
    // over a postcopy channel that takes answers beside the push (answers_beside_push()).
    bool reader_answers() const { return channel_ != nullptr ? channel_answers_ : preempt_ != nullptr; }
    // Pages written to `out` go now (over a postcopy channel they went already).
    Status flush(ByteStream& out) { return channel_ != nullptr ? Status{} : out.flush(); }
    // The return path's thread: answers `r` on the preempt connection or the channel (nothing
    // once END went there).
    Status answer(const Request& r);
    std::optional<Request> next_request();
    struct Run {
        uint32_t block = 0;
        uint64_t first = 0, count = 0;
    };
    std::optional<Run> next_push_run();  // under mutex_
    // Sends `r`'s missing pages on `out` (or the channel); with `resend`, pages all sent
    // already go once more. The push then goes on from past them.
    Status serve(ByteStream& out, const Request& r, bool resend);
    void served(const Request& r, bool any, bool again);
    Status push_background();
    // The next run of `block`'s missing pages in [from, end) (taken, when claims()).
    Run next_missing(uint32_t block, uint64_t from, uint64_t end);
    // Over a channel whose answers come from the return path's thread, a page is taken off what
    // is missing as one thread picks it, before it goes: the other thread never sends it too.
    // The destination frees a request once its page lands, so a second copy, an answer into a
    // request it no longer has, would end the migration. (On a stream, a second copy is placed
    // or found present: pages are taken once they have gone.)
    bool claims() const { return channel_ != nullptr && reader_answers(); }
    void take(uint32_t block, uint64_t first, uint64_t count);  // under mutex_: missing no more
    // Sends [first, first + count) of `block` on `out`: runs of data pages and of zero pages;
    // returns the bytes sent. `again`: pages sent already, sent once more; nothing about what
    // is missing changes.
    // `token`: the channel's request these pages answer (its first run; a request is one page).
    Result<uint64_t> send_pages(ByteStream& out, uint32_t block, uint64_t first, uint64_t count, bool again = false,
                                std::optional<uint32_t> token = std::nullopt);
    Result<uint64_t> send_run(ByteStream& out, uint32_t block, uint64_t first, uint64_t count, bool zero, bool again,
                              std::optional<uint32_t> token);
    Result<uint64_t> send_on_channel(uint32_t block, uint64_t first, uint64_t count, bool zero,
                                     std::optional<uint32_t> token);
    uint64_t sent(uint32_t block, uint64_t first, uint64_t count, uint64_t bytes);
    Status send_end();
    Status wait_done();

    const memory::GuestMemory& mem_;
    ByteStream* stream_;  // the migration thread's; replaced only while the reader is stopped
    SourcePostcopyChannel* channel_;  // or null: the stream carries postcopy (as stream_)
    bool channel_answers_ = false;    // channel_->answers_beside_push(), asked once per channel
    ByteStream* preempt_ = nullptr;   // postcopy-preempt's connection (as stream_)
    bool begun_ = false;              // channel_->begin() went
    std::vector<BlockInfo> blocks_;
    const std::vector<std::vector<uint64_t>> at_switch_;  // what the destination lacked at the switch
    const CancelToken& cancel_;
    Config config_;
    RateLimiter limiter_;  // the push's thread's
    std::thread reader_;
    // The reader's answers and the END: one at a time on preempt_ (or the channel's answers
    // against its END), so that no answer follows the END.
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
    std::deque<Request> requests_;
    bool done_ = false;         // POSTCOPY_DONE came
    bool stop_reader_ = false;
    std::optional<Error> failure_;  // the return path failed or carried nonsense
    PostcopyStats stats_;
    LatencySamples serve_latency_;  // requests whose pages went (or went again)
    uint64_t remaining_ = 0;
};

}  // namespace vmm::migration

#include "vmm/migration/postcopy/sender.h"

#include <time.h>

#include "vmm/common/thread_name.h"
#include "vmm/memory/dirty_bitmap.h"
#include "vmm/common/zero_page.h"

namespace vmm::migration {

namespace {
constexpr uint64_t kBackgroundPages = 16;  // 64 KiB a record: a request waits behind at most one
constexpr auto kReturnPoll = std::chrono::milliseconds(200);
// A readahead burst goes at once and is accounted to max-postcopy-bandwidth, but the push then
// waits at most this long for it: like a request, what the guest is about to touch is never
// held back, and the destination never hears nothing for long.
constexpr auto kMostOwed = std::chrono::seconds(1);
}  // namespace

PostcopySender::PostcopySender(const memory::GuestMemory& mem, std::unique_ptr<SourcePostcopyLink> link,
                               std::vector<BlockInfo> blocks, std::vector<std::vector<uint64_t>> missing,
                               const stream::CancelToken& cancel, const LiveSettings& live, Config config)
    : mem_(mem), link_(std::move(link)), answers_(link_->answers()), blocks_(std::move(blocks)), at_switch_(missing),
      cancel_(cancel), live_(live), config_(config),
      limiter_(live.reader(Live::max_postcopy_bandwidth), RateLimiter::cancellable_sleep(cancel)),
      missing_(std::move(missing)), readahead_(live.get(Live::postcopy_readahead) / kStreamPageSize) {
    for (const auto& b : missing_) remaining_ += memory::count_bits(b.data(), b.size());
    stats_.switched = true;
    stats_.missing_pages = remaining_;
}

PostcopySender::~PostcopySender() { detach(); }

void PostcopySender::detach() {
    {
        std::lock_guard lock(mutex_);
        stop_reader_ = true;
    }
    if (reader_.joinable()) reader_.join();
    link_.reset();
}

void PostcopySender::resume(std::unique_ptr<SourcePostcopyLink> link, const std::vector<std::vector<uint64_t>>& received) {
    detach();
    link_ = std::move(link);
    answers_ = link_->answers();
    begun_ = false;
    {
        std::lock_guard w(answers_mutex_);
        answers_ended_ = false;
    }
    std::lock_guard lock(mutex_);
    burst_ = {};
    uint64_t remaining = 0;
    for (size_t b = 0; b < missing_.size(); ++b) {
        for (size_t w = 0; w < missing_[b].size(); ++w) missing_[b][w] = at_switch_[b][w] & ~received[b][w];
        remaining += memory::count_bits(missing_[b].data(), missing_[b].size());
    }
    cursor_block_ = 0;
    cursor_page_ = 0;
    remaining_ = remaining;
    requests_.clear();  // the destination asks again for what it still waits on
    failure_.reset();
    done_ = false;
    stop_reader_ = false;
    ++stats_.recoveries;
}

namespace {
double cpu_ms(clockid_t clock) {
    timespec t{};
    if (::clock_gettime(clock, &t) != 0) return 0;
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}
double thread_cpu_ms() { return cpu_ms(CLOCK_THREAD_CPUTIME_ID); }
}  // namespace

void PostcopySender::read_requests() {
    name_this_thread("postcopy-return");
    double before = 0;  // what earlier threads (before a recovery) used
    {
        std::lock_guard lock(mutex_);
        before = stats_.return_cpu_ms;
    }
    for (;;) {
        {
            std::lock_guard lock(mutex_);
            if (stop_reader_) return;
        }
        if (cancel_.cancelled()) return;
        auto m = link_->next_request(kReturnPoll);
        if (m && !*m) continue;  // a destination whose guest touches nothing missing says nothing
        if (m && (*m)->held) {
            std::lock_guard lock(mutex_);
            stats_.return_cpu_ms = before + thread_cpu_ms();
            if (auto s = hold(**m); !s) {
                failure_ = s.error().context("the postcopy return path");
                cv_.notify_all();
                return;
            }
            continue;
        }
        Status answered;
        if (m && !(*m)->done) {
            Request r{(*m)->block, (*m)->first_page, (*m)->count, (*m)->token, std::chrono::steady_clock::now()};
            {
                std::lock_guard lock(mutex_);
                ++stats_.requests;
                if (!answers_.beside_push) requests_.push_back(r);
            }
            if (answers_.beside_push) answered = answer(r);
        }
        std::lock_guard lock(mutex_);
        stats_.return_cpu_ms = before + thread_cpu_ms();
        if (!m) {
            if (!done_ && !stop_reader_) failure_ = m.error().context("the postcopy return path");
        } else if (!answered) {
            if (!failure_) failure_ = answered.error().context("answering a page request");
        } else if ((*m)->done) {
            done_ = true;
        }
        cv_.notify_all();
        if (!m || !answered || done_) return;
    }
}

std::optional<PostcopySender::Request> PostcopySender::next_request() {
    std::lock_guard lock(mutex_);
    if (requests_.empty()) return std::nullopt;
    Request r = requests_.front();
    requests_.pop_front();
    return r;
}

Result<uint64_t> PostcopySender::send_run(Path path, uint32_t block, uint64_t first, uint64_t count, bool zero,
                                          bool again, std::optional<uint32_t> token) {
    const uint8_t* host = mem_.blocks()[block]->host() + first * kStreamPageSize;
    auto bytes = link_->send(path, PageRun{block, first, count, zero, host}, token);
    if (!bytes) return bytes.error();
    std::lock_guard lock(mutex_);
    if (*bytes == SourcePostcopyLink::kHeld) {  // a push the destination fetches itself
        uint64_t before = remaining_;
        take(block, first, count);
        stats_.held_pages += claims() ? count : before - remaining_;  // claimed: taken before it went
        pushed_held_ += count;
        return uint64_t{0};
    }
    if (path == Path::answer && answers_.own_connection) stats_.preempt_pages += count;
    if (again) {
        stats_.resent_pages += count;
        stats_.postcopy_bytes += *bytes;
        return *bytes;
    }
    take(block, first, count);
    stats_.postcopy_bytes += *bytes;
    return *bytes;
}

// take(): [first, first + count) of `block` has gone, or is about to (claims()): missing no
// more. A page may have gone on the other path meanwhile (a request's, a push's run): it counts once.
void PostcopySender::take(uint32_t block, uint64_t first, uint64_t count) {
    for (uint64_t p = first; p < first + count; ++p) {
        uint64_t bit = uint64_t{1} << (p % 64);
        if ((missing_[block][p / 64] & bit) == 0) continue;
        missing_[block][p / 64] &= ~bit;
        --remaining_;
    }
}

// Under mutex_: pages the destination read itself and holds, checked, and pushed no more.
Status PostcopySender::hold(const PostcopyRequest& r) {
    if (r.block >= missing_.size() || r.count == 0 || r.first_page > blocks_[r.block].size / kStreamPageSize ||
        r.count > blocks_[r.block].size / kStreamPageSize - r.first_page) {
        return Error(fmt::format("the destination says it holds {} pages from page {} of block {}, outside guest RAM",
                                 r.count, r.first_page, r.block));
    }
    uint64_t before = remaining_;
    take(r.block, r.first_page, r.count);
    stats_.held_pages += before - remaining_;
    return {};
}

// [first, first + count) are all missing (or, `again`, all sent already): runs of data pages and
// of zero pages. Returns the bytes sent.
Result<uint64_t> PostcopySender::send_pages(Path path, uint32_t block, uint64_t first, uint64_t count, bool again,
                                            std::optional<uint32_t> token) {
    const uint8_t* host = mem_.blocks()[block]->host();
    uint64_t start = first, bytes = 0;
    bool zero = config_.zero_markers && is_zero_page(host + first * kStreamPageSize);
    for (uint64_t p = first + 1; p <= first + count; ++p) {
        bool z = p < first + count && config_.zero_markers && is_zero_page(host + p * kStreamPageSize);
        if (p < first + count && z == zero) continue;
        auto sent = send_run(path, block, start, p - start, zero, again, std::exchange(token, std::nullopt));
        if (!sent) return sent.error();
        bytes += *sent;
        start = p;
        zero = z;
    }
    return bytes;
}

PostcopySender::Run PostcopySender::next_missing(uint32_t block, uint64_t from, uint64_t end) {
    std::lock_guard lock(mutex_);
    auto run = memory::next_run(missing_[block], from, end);
    if (claims()) take(block, run.first, run.count);
    return {block, run.first, run.count};
}

Status PostcopySender::answer(const Request& r) {
    std::lock_guard w(answers_mutex_);
    if (answers_ended_) return {};  // every page has gone: the answer is on the stream
    // On the push's own connection, or a channel, a page on its way needs no second copy.
    return serve(Path::answer, r, answers_.own_connection);
}

Status PostcopySender::serve(Path path, const Request& r, bool resend) {
    uint64_t end = r.first_page + r.count;
    bool any = false;
    for (auto run = next_missing(r.block, r.first_page, end); run.count != 0;
         run = next_missing(r.block, run.first + run.count, end)) {
        // The token goes with the first run (a channel's request is one page: the one run answers
        // it, if it is missing still; sent already, the destination places it from the push).
        if (auto s = send_pages(path, r.block, run.first, run.count, false, any ? std::nullopt : r.token); !s) return s.error();
        any = true;
    }
    // On its way, but on the stream, behind what the push queued there (a readahead burst, a
    // full socket): sent again on the preempt connection. Whichever copy comes first is placed;
    // the other finds the page present and changes nothing (the source's guest is paused: both
    // copies are the same bytes).
    bool again = !any && resend;
    if (again) {
        if (auto s = send_pages(path, r.block, r.first_page, std::min<uint64_t>(r.count, kBackgroundPages), true); !s)
            return s.error();
    }
    if (auto s = link_->flush(path); !s) return s;
    served(r, any, again);
    return {};
}

// After a request's answer: the push goes on from past it, with the readahead window it opened.
void PostcopySender::served(const Request& r, bool any, bool again) {
    std::lock_guard lock(mutex_);
    uint64_t end = r.first_page + r.count;
    cursor_block_ = r.block;
    cursor_page_ = end;
    readahead_.set_max(live_.get(Live::postcopy_readahead) / kStreamPageSize);  // x-postcopy-readahead now
    burst_ = {r.block, end, readahead_.on_request(r.block, r.first_page, r.count)};
    ++serves_;
    if (any) ++stats_.requests_served;
    if (any || again) {
        serve_latency_.add(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - r.arrived).count());
    }
    cv_.notify_all();
}

// The next run of missing pages from the cursor on, wrapping around the blocks (the cursor
// moves to it); none when nothing is missing.
std::optional<PostcopySender::Run> PostcopySender::next_push_run() {
    for (size_t tries = 0; tries <= blocks_.size(); ++tries) {
        uint64_t pages = blocks_[cursor_block_].size / kStreamPageSize;
        auto run = memory::next_run(missing_[cursor_block_], cursor_page_, pages, kBackgroundPages);
        if (run.count != 0) return Run{cursor_block_, run.first, run.count};
        cursor_block_ = static_cast<uint32_t>((cursor_block_ + 1) % blocks_.size());
        cursor_page_ = 0;
    }
    return std::nullopt;
}

// The next run of the push, once its turn under max-postcopy-bandwidth has come. A request cuts
// the wait short (it is what the guest is blocked on), and the run waits again after it. Pages
// within a readahead window (right past a request) go without waiting, and are accounted all
// the same: the push waits that much longer after them, by at most kMostOwed.
Status PostcopySender::push_background() {
    std::unique_lock lock(mutex_);
    auto run = next_push_run();
    if (!run) {  // the last pages went as answers meanwhile
        if (remaining_ == 0) return {};
        return Error("internal: postcopy found no missing page although some remain");
    }
    bool ahead = run->block == burst_.block && run->first >= burst_.first && run->first < burst_.first + burst_.count;
    if (ahead) {
        run->count = std::min(run->count, burst_.first + burst_.count - run->first);
    } else if (auto wait = limiter_.ahead(); wait.count() > 0) {
        uint64_t serves = serves_;
        cv_.wait_for(lock, std::min<std::chrono::nanoseconds>(wait, kReturnPoll),
                     [&] { return !requests_.empty() || failure_.has_value() || serves_ != serves; });
        if (cancel_.cancelled()) return Error("migration cancelled");
        return {};
    }
    uint64_t serves = serves_, held = pushed_held_;
    if (claims()) take(run->block, run->first, run->count);
    lock.unlock();
    auto sent = send_pages(Path::push, run->block, run->first, run->count);
    if (!sent) return sent.error();
    lock.lock();
    if (serves_ == serves) cursor_page_ = run->first + run->count;  // else an answer moved it
    stats_.background_pages += run->count - (pushed_held_ - held);  // the rest the destination fetches
    if (ahead) stats_.readahead_pages += run->count;
    lock.unlock();
    limiter_.account(*sent);
    if (ahead) limiter_.forgive_beyond(kMostOwed);
    return link_->flush(Path::push);
}

Status PostcopySender::wait_done() {
    std::unique_lock lock(mutex_);
    while (!done_ && !failure_) {
        if (cancel_.cancelled()) return Error("migration cancelled");
        cv_.wait_for(lock, kReturnPoll);
    }
    if (failure_) return *failure_;
    return {};
}

// The whole process's CPU time while this runs is the source's cost of postcopy (its guest is
// paused for good: the migration thread, the return path, what the transport does on them).
Status PostcopySender::run() {
    double from = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
    Status s = run_once();
    std::lock_guard lock(mutex_);
    stats_.source_cpu_ms += cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - from;
    return s;
}

Status PostcopySender::run_once() {
    if (!begun_) {
        if (auto s = link_->begin(); !s) return s;
        begun_ = true;
    }
    reader_ = std::thread([this] { read_requests(); });
    while (remaining_pages() != 0) {
        {
            std::lock_guard lock(mutex_);
            if (failure_) return *failure_;
        }
        if (cancel_.cancelled()) return Error("migration cancelled");
        while (auto r = next_request()) {
            if (auto s = serve(Path::push, *r, false); !s) return s;
        }
        if (remaining_pages() == 0) break;
        if (auto s = push_background(); !s) return s;
    }
    if (auto s = send_end(); !s) return s;
    return wait_done();
}

// Once no answer can follow it: the link's END goes after every answer.
Status PostcopySender::send_end() {
    std::lock_guard w(answers_mutex_);
    answers_ended_ = true;
    return link_->end();
}

PostcopyStats PostcopySender::stats() const {
    std::lock_guard lock(mutex_);
    PostcopyStats s = stats_;
    // Every request not served first was for pages on their way already, those that came after
    // the last page had gone included.
    s.already_sent = s.requests - s.requests_served;
    s.serve_latency = serve_latency_.summary();
    return s;
}

uint64_t PostcopySender::remaining_pages() const {
    std::lock_guard lock(mutex_);
    return remaining_;
}

}  // namespace vmm::migration

// PostcopySender against a scripted destination, over socket pairs and again over pipes (it
// takes any ByteStream, not a socket's only: each test runs on both): a request is answered ahead
// of the paced push, which then goes on from past it; requests in order open a readahead window
// that goes at once; with preempt, a request is answered even while the push cannot write, and
// one for a page already sent goes again on the preempt connection;
// every page goes once, then END, and POSTCOPY_DONE ends the run; a request outside guest RAM
// fails the run with the reason. Over a postcopy channel that takes answers beside the push
// (RDMA's), the return path's thread answers while the push is held; over one that does not, the
// migration thread answers once the push lets it.
#include "vmm/migration/postcopy/sender.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "tests/support/memory_fixture.h"
#include "tests/support/pipe_stream.h"
#include "tests/support/wait.h"
#include "vmm/migration/transport/postcopy_stream.h"
#include "vmm/stream/socket_stream.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/return_path.h"

namespace vmm::migration::test {

namespace {

using vmm::test::eventually;
constexpr auto kIoTimeout = std::chrono::seconds(60);

struct Arrival {
    int conn;  // 0: the stream, 1: the preempt connection
    RecordType type;
    uint32_t block;
    uint64_t first, count;
};

enum class Streams { socket, pipe };
void PrintTo(Streams s, std::ostream* os) { *os << (s == Streams::socket ? "socket" : "pipe"); }  // in test names

// Both ends of one connection: the sender's stream and the destination's.
struct Connection {
    std::unique_ptr<stream::ByteStream> source, dest;
    UniqueFd requests;  // what writes to the source's end, for requests beside the destination's reader
};

Connection connect(Streams kind, const stream::CancelToken& src_cancel, const stream::CancelToken& dst_cancel) {
    if (kind == Streams::pipe) {
        auto p = vmm::test::pipe_connection(&src_cancel, &dst_cancel);
        return {std::move(p.source), std::move(p.dest), std::move(p.to_source)};
    }
    Connection c;
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
    c.requests = UniqueFd(::dup(sv[1]));
    c.source = std::make_unique<stream::SocketStream>(UniqueFd(sv[0]), src_cancel, kIoTimeout, "destination", false);
    c.dest = std::make_unique<stream::SocketStream>(UniqueFd(sv[1]), dst_cancel, kIoTimeout, "source", false);
    return c;
}

// A whole message to `fd` (a socket's or a pipe's), or false.
bool write_all(int fd, const std::vector<uint8_t>& m) {
    size_t done = 0;
    while (done < m.size()) {
        ssize_t n = ::write(fd, m.data() + done, m.size() - done);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

// The destination's side: a reader per connection logs every record and checks its bytes
// against the source's RAM; after END on the stream it answers POSTCOPY_DONE when told to.
class FakeDestination {
public:
    FakeDestination(const memory::GuestMemory& src, std::vector<BlockInfo> blocks, bool answer_done)
        : src_(src), blocks_(std::move(blocks)), answer_done_(answer_done) {}
    ~FakeDestination() { join(); }

    void start(int conn, Connection& c) {
        readers_.emplace_back([this, conn, &c] { read_all(conn, *c.dest, c.requests.get()); });
    }
    void join() {
        for (auto& t : readers_)
            if (t.joinable()) t.join();
    }
    std::vector<Arrival> arrivals() const {
        std::lock_guard lock(mutex_);
        return log_;
    }
    // Whether [first, first + count) of `block` came in data/zero records, on `conn` (-1: any).
    bool arrived(uint32_t block, uint64_t page, int conn = -1) const {
        for (const auto& a : arrivals())
            if ((conn < 0 || a.conn == conn) && a.type != RecordType::end && a.block == block && page >= a.first &&
                page < a.first + a.count)
                return true;
        return false;
    }
    bool ended() const {
        std::lock_guard lock(mutex_);
        return end_seen_;
    }
    uint64_t wrong_bytes() const {
        std::lock_guard lock(mutex_);
        return wrong_;
    }

private:
    void read_all(int conn, stream::ByteStream& in, int reply_fd) {
        for (;;) {
            auto r = read_record(in, blocks_, 4096);
            if (!r) return;  // the source closed the connection
            if (r->type == RecordType::pages) {
                std::vector<uint8_t> data(r->length);
                if (!in.read_exact(data)) return;
                check(*r, data);
            }
            std::lock_guard lock(mutex_);
            log_.push_back({conn, r->type, r->block, r->offset / 4096, r->length / 4096});
            if (r->type != RecordType::end || conn != 0) continue;
            end_seen_ = true;
            if (answer_done_) {
                auto done = encode_postcopy_done();
                EXPECT_TRUE(write_all(reply_fd, done));
            }
            return;
        }
    }
    void check(const Record& r, const std::vector<uint8_t>& data) {
        const uint8_t* want = src_.blocks()[r.block]->host() + r.offset;
        if (std::memcmp(want, data.data(), data.size()) != 0) {
            std::lock_guard lock(mutex_);
            ++wrong_;
        }
    }

    const memory::GuestMemory& src_;
    std::vector<BlockInfo> blocks_;
    bool answer_done_;
    std::vector<std::thread> readers_;
    mutable std::mutex mutex_;
    std::vector<Arrival> log_;
    bool end_seen_ = false;
    uint64_t wrong_ = 0;
};

void request(Connection& c, uint32_t block, uint64_t page, uint32_t pages = 1) {
    auto m = encode_page_request(block, page * 4096, pages * 4096);
    ASSERT_TRUE(write_all(c.requests.get(), m));
}

// A link over a channel of its own (the RDMA plugin's shape) that logs what is sent, and whose
// push can be held inside send(), as one waiting for the destination's credit is.
class FakeChannel : public SourcePostcopyLink {
public:
    explicit FakeChannel(bool beside) : beside_(beside) {}
    Status begin() override { return {}; }
    Result<std::optional<PostcopyRequest>> next_request(std::chrono::milliseconds wait) override {
        std::unique_lock lock(mutex_);
        cv_.wait_for(lock, wait, [&] { return !asks_.empty(); });
        if (asks_.empty()) return std::optional<PostcopyRequest>{};
        PostcopyRequest a = asks_.front();
        asks_.erase(asks_.begin());
        return std::optional<PostcopyRequest>{a};
    }
    Result<uint64_t> send(Path path, const PageRun& run, std::optional<uint32_t> answer) override {
        (void)path;
        std::unique_lock lock(mutex_);
        if (!answer) {
            ++pushes_;
            cv_.wait_for(lock, std::chrono::seconds(30), [&] { return !hold_push_; });  // the push's thread is stuck here
            if (run.block == 0 && run.first_page + run.count <= fetched_below_) return kHeld;
        } else {
            answers_.push_back({*answer, run.block, run.first_page * 4096});
        }
        return run.zero ? 0 : run.count * 4096;
    }
    Status flush(Path path) override {
        (void)path;
        return {};
    }
    Status end() override { return {}; }
    Answers answers() const override { return {.beside_push = beside_, .own_connection = false, .once = beside_}; }
    uint64_t longest_run() const override { return PostcopyPages::kMaxPages; }

    void ask(uint32_t block, uint64_t page, uint32_t token) {
        std::lock_guard lock(mutex_);
        asks_.push_back({false, block, page, 1, token});
        cv_.notify_all();
    }
    // The destination fetches block 0's pages below `page` itself: a push of them is held back.
    void fetch_below(uint64_t page) {
        std::lock_guard lock(mutex_);
        fetched_below_ = page;
    }
    void say_done() {
        std::lock_guard lock(mutex_);
        asks_.push_back(PostcopyRequest::all_placed());
        cv_.notify_all();
    }
    void release_push() {
        std::lock_guard lock(mutex_);
        hold_push_ = false;
        cv_.notify_all();
    }
    uint64_t pushes() const {
        std::lock_guard lock(mutex_);
        return pushes_;
    }
    bool answered(uint32_t token, uint32_t block, uint64_t page) const {
        std::lock_guard lock(mutex_);
        for (const auto& a : answers_)
            if (a.token == token && a.block == block && a.offset == page * 4096) return true;
        return false;
    }

private:
    struct Answer {
        uint32_t token, block;
        uint64_t offset;
    };
    const bool beside_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<PostcopyRequest> asks_;
    std::vector<Answer> answers_;
    uint64_t pushes_ = 0;
    bool hold_push_ = true;
    uint64_t fetched_below_ = 0;
};

// A source whose block 0 ("pc.ram", 2048 pages) is missing on the destination, every page of
// it distinct and non-zero but for every 8th, which is zero; block 1 is there already.
class PostcopySenderTest : public ::testing::TestWithParam<Streams> {
protected:
    void SetUp() override {
        ::sigaction(SIGPIPE, nullptr, &old_sigpipe_);  // a write to a pipe whose reader left: an error, not a signal
        struct sigaction ignore {};
        ignore.sa_handler = SIG_IGN;
        ::sigaction(SIGPIPE, &ignore, nullptr);
        for (uint64_t p = 0; p < kPages; ++p)
            if (p % 8 != 0) std::memset(ram() + p * 4096, static_cast<int>(p % 251) + 1, 4096);
        missing_ = {std::vector<uint64_t>(kPages / 64, ~uint64_t{0}),
                    std::vector<uint64_t>(mem_.blocks()[1]->size() / 4096 / 64, 0)};
    }
    void TearDown() override {
        if (channel_) channel_->release_push();
        if (src_cancel_) src_cancel_->cancel();
        if (runner_.joinable()) runner_.join();
        sender_.reset();  // joins its return-path reader before the streams go
        for (auto& c : conns_) c.source.reset();  // the destination's readers see the end
        if (dest_) dest_->join();
        ::sigaction(SIGPIPE, &old_sigpipe_, nullptr);
    }
    uint8_t* ram() { return mem_.blocks()[0]->host(); }

    // Starts the sender's run() on a thread; with `preempt`, over two connections. Without
    // `read_stream`, the destination reads only the preempt connection: the stream fills up.
    // The push's pace and readahead, as the monitor's settings would give them (LiveSettings).
    struct Pace {
        uint64_t max_bandwidth = 0;       // max-postcopy-bandwidth, bytes/s
        uint64_t readahead_pages = 256;   // x-postcopy-readahead, in pages
    };
    void set(Pace pace) {
        live_.set(Live::max_postcopy_bandwidth, pace.max_bandwidth);
        live_.set(Live::postcopy_readahead, pace.readahead_pages * 4096);
    }
    // The connections, the destination and the sender; the run begins with launch() (start does both).
    void start(Pace pace, bool preempt = false, bool answer_done = false, bool read_stream = true) {
        prepare(pace, preempt, answer_done, read_stream);
        launch();
    }
    void prepare(Pace pace, bool preempt = false, bool answer_done = false, bool read_stream = true) {
        set(pace);
        src_cancel_.emplace(stream::CancelToken::create().value());
        dst_cancel_.emplace(stream::CancelToken::create().value());
        conns_.resize(preempt ? 2 : 1);
        for (auto& c : conns_) c = connect(GetParam(), *src_cancel_, *dst_cancel_);
        dest_ = std::make_unique<FakeDestination>(mem_, layout(mem_), answer_done);
        for (size_t i = read_stream ? 0 : 1; i < conns_.size(); ++i) dest_->start(static_cast<int>(i), conns_[i]);
        auto link = stream_postcopy_source(*conns_[0].source, preempt ? conns_[1].source.get() : nullptr, {layout(mem_)});
        sender_ = std::make_unique<PostcopySender>(mem_, std::move(link), layout(mem_), missing_, *src_cancel_, live_,
                                                   PostcopySender::Config{});
    }
    void launch() { runner_ = std::thread([this] { result_ = sender_->run(); }); }
    Status finish() {
        runner_.join();
        return result_;
    }
    // The same over a fake channel (no stream at all).
    void start_on_channel(bool answers_beside_push, Pace pace) {
        set(pace);
        auto channel = std::make_unique<FakeChannel>(answers_beside_push);
        channel_ = channel.get();
        src_cancel_.emplace(stream::CancelToken::create().value());
        sender_ = std::make_unique<PostcopySender>(mem_, std::move(channel), layout(mem_), missing_, *src_cancel_, live_,
                                                   PostcopySender::Config{});
        runner_ = std::thread([this] { result_ = sender_->run(); });
    }

    struct sigaction old_sigpipe_ {};
    static constexpr uint64_t kPages = 8 * M / 4096;
    memory::GuestMemory mem_ = make_memory();
    std::vector<std::vector<uint64_t>> missing_;
    LiveSettings live_;  // outlives the sender, which reads it
    std::optional<stream::CancelToken> src_cancel_, dst_cancel_;
    std::vector<Connection> conns_;
    std::unique_ptr<FakeDestination> dest_;
    FakeChannel* channel_ = nullptr;  // the sender's
    std::unique_ptr<PostcopySender> sender_;
    std::thread runner_;
    Status result_;
};

constexpr uint64_t kCrawl = 64 * 1024;  // bytes/s: one background record a second

TEST_P(PostcopySenderTest, ARequestGoesAheadOfThePacedPushWhichGoesOnFromPastIt) {
    start({.max_bandwidth = kCrawl, .readahead_pages = 0});
    ASSERT_TRUE(eventually([&] { return dest_->arrived(0, 0); }, 10)) << "the push sent nothing";
    request(conns_[0], 0, 1001);  // paced, the push would reach it in a minute
    ASSERT_TRUE(eventually([&] { return dest_->arrived(0, 1001); }, 10)) << "the request was not served";
    ASSERT_TRUE(eventually([&] { return dest_->arrived(0, 1002); }, 10));
    ASSERT_TRUE(eventually([&] { return sender_->stats().requests_served == 1; }, 10));
    auto log = dest_->arrivals();
    size_t i = 0;
    while (!(log[i].first <= 1001 && 1001 < log[i].first + log[i].count)) ++i;
    EXPECT_EQ(log[i].count, 1u) << "the request's page came with others";
    ASSERT_LT(i + 1, log.size());
    EXPECT_EQ(log[i + 1].first, 1002u) << "the push did not go on from past the request";
    EXPECT_EQ(log[i + 1].count, 6u) << "its first run: data pages up to the zero page 1008";
    PostcopyStats st = sender_->stats();
    EXPECT_EQ(st.requests, 1u);
    EXPECT_EQ(st.requests_served, 1u);
    EXPECT_EQ(st.readahead_pages, 0u);
    EXPECT_EQ(st.serve_latency.count, 1u);
    EXPECT_LE(st.serve_latency.p50_us, st.serve_latency.max_us);
    EXPECT_EQ(dest_->wrong_bytes(), 0u);
}

TEST_P(PostcopySenderTest, RequestsInOrderOpenAReadaheadWindowThatGoesAtOnceAndDoubles) {
    // A page a second: after its first record the push owes 16 s, and no paced record can
    // carry it ten seconds further.
    start({.max_bandwidth = 4096, .readahead_pages = 64});
    ASSERT_TRUE(eventually([&] { return dest_->arrived(0, 0); }, 10));
    request(conns_[0], 0, 1001);
    ASSERT_TRUE(eventually([&] { return dest_->arrived(0, 1001); }, 10));
    request(conns_[0], 0, 1002);  // in order: a window of 16 pages past it
    ASSERT_TRUE(eventually([&] { return dest_->arrived(0, 1003) && dest_->arrived(0, 1018); }, 10))
        << "the readahead window did not go at once";
    ASSERT_TRUE(eventually([&] { return sender_->stats().readahead_pages == 16; }, 10))
        << sender_->stats().readahead_pages;
    request(conns_[0], 0, 1019);  // in order again: the window doubles, to [1020, 1052)
    ASSERT_TRUE(eventually([&] { return dest_->arrived(0, 1051); }, 10)) << "the window did not double";
    // 48 unless the push's own turn (a second after the first window) took [1019, 1035) before
    // the request came; then the window sent the rest, 1035 to 1051.
    ASSERT_TRUE(eventually([&] { return sender_->stats().readahead_pages >= 33; }, 10))
        << sender_->stats().readahead_pages;
    EXPECT_EQ(dest_->wrong_bytes(), 0u);
}

TEST_P(PostcopySenderTest, ARequestForAPageSentAlreadyGoesAgainOnThePreemptConnection) {
    start({.max_bandwidth = kCrawl, .readahead_pages = 0}, true);
    ASSERT_TRUE(eventually([&] { return dest_->arrived(0, 5, 0); }, 10));
    request(conns_[0], 0, 5);  // sent on the stream already
    ASSERT_TRUE(eventually([&] { return dest_->arrived(0, 5, 1); }, 10)) << "not sent again on the preempt connection";
    request(conns_[0], 0, 1001);  // never sent: served on the preempt connection
    ASSERT_TRUE(eventually([&] { return dest_->arrived(0, 1001, 1); }, 10));
    ASSERT_TRUE(eventually([&] { return sender_->stats().requests_served == 1; }, 10));
    PostcopyStats st = sender_->stats();
    EXPECT_EQ(st.requests, 2u);
    EXPECT_EQ(st.already_sent, 1u);
    EXPECT_EQ(st.resent_pages, 1u);
    EXPECT_EQ(st.preempt_pages, 2u);
    EXPECT_EQ(st.serve_latency.count, 2u) << "a request answered again has its serve latency too";
    EXPECT_GT(st.serve_latency.max_us, 0.0);
    EXPECT_FALSE(dest_->arrived(0, 1001, 0)) << "a served page went on the stream too";
    EXPECT_EQ(dest_->wrong_bytes(), 0u);
}

TEST_P(PostcopySenderTest, WithPreemptARequestIsAnsweredWhileThePushIsStuckOnAFullStream) {
    start({.max_bandwidth = 0, .readahead_pages = 0}, true, false, false);
    request(conns_[0], 0, 2000);  // far past what the stream's socket holds
    ASSERT_TRUE(eventually([&] { return dest_->arrived(0, 2000, 1); }, 10))
        << "the request waited for the push's thread, whose write cannot finish";
    ASSERT_TRUE(eventually([&] { return sender_->stats().requests_served == 1; }, 10));
    EXPECT_EQ(sender_->stats().resent_pages, 0u);
    EXPECT_EQ(dest_->wrong_bytes(), 0u);
}

TEST_P(PostcopySenderTest, EveryMissingPageGoesOnceThenEndAndDoneEndsTheRun) {
    // The requests are on the return path before the run begins: uncapped, the push could
    // otherwise send every page, END, and take the destination's DONE before they were written
    // (a loaded CI host did once: requests 0).
    prepare({.max_bandwidth = 0, .readahead_pages = 64}, false, true);
    request(conns_[0], 0, 2000);
    request(conns_[0], 0, 2001);
    launch();
    auto s = finish();
    ASSERT_TRUE(s) << s.error().message();
    ASSERT_TRUE(eventually([&] { return dest_->ended(); }, 10));
    std::vector<int> times(kPages, 0);
    uint64_t zero_pages = 0, ends = 0;
    for (const auto& a : dest_->arrivals()) {
        if (a.type == RecordType::end) {
            ++ends;
            continue;
        }
        ASSERT_EQ(a.block, 0u) << "a page the destination had was sent";
        for (uint64_t p = a.first; p < a.first + a.count; ++p) {
            times[p] += 1;
            if (a.type == RecordType::zero) {
                EXPECT_EQ(p % 8, 0u) << "page " << p << " is not zero";
                ++zero_pages;
            }
        }
    }
    EXPECT_EQ(ends, 1u);
    for (uint64_t p = 0; p < kPages; ++p) EXPECT_EQ(times[p], 1) << "page " << p;
    EXPECT_EQ(zero_pages, kPages / 8);
    PostcopyStats st = sender_->stats();
    EXPECT_EQ(st.missing_pages, kPages);
    EXPECT_EQ(sender_->remaining_pages(), 0u);
    EXPECT_EQ(st.requests, 2u);
    EXPECT_EQ(st.background_pages + st.requests_served, kPages) << "requests are a page each";
    EXPECT_EQ(st.resent_pages, 0u);
    EXPECT_EQ(dest_->wrong_bytes(), 0u);
}

TEST_P(PostcopySenderTest, ARequestOutsideGuestRamFailsTheRunWithTheReason) {
    start({.max_bandwidth = kCrawl, .readahead_pages = 0});
    request(conns_[0], 0, kPages + 3);
    auto s = finish();
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message().find("return path"), std::string::npos) << s.error().message();
    EXPECT_GE(sender_->remaining_pages(), kPages - 16) << "more went than the push's first record";
}

TEST_P(PostcopySenderTest, OverAChannelThatTakesThemARequestIsAnsweredWhileThePushIsStuck) {
    start_on_channel(true, {.max_bandwidth = 0, .readahead_pages = 0});
    FakeChannel& channel = *channel_;
    ASSERT_TRUE(eventually([&] { return channel.pushes() == 1; }, 10)) << "the push did not start";
    channel.ask(0, 2000, 7);
    ASSERT_TRUE(eventually([&] { return channel.answered(7, 0, 2000); }, 10))
        << "the request waited for the push's thread, held in the channel";
    ASSERT_TRUE(eventually([&] { return sender_->stats().requests_served == 1; }, 10));
    EXPECT_EQ(sender_->stats().serve_latency.count, 1u);
}

TEST_P(PostcopySenderTest, OverAChannelThatDoesNotTakeThemTheMigrationThreadAnswers) {
    start_on_channel(false, {.max_bandwidth = 0, .readahead_pages = 0});
    FakeChannel& channel = *channel_;
    ASSERT_TRUE(eventually([&] { return channel.pushes() == 1; }, 10));
    channel.ask(0, 2000, 9);
    ASSERT_TRUE(eventually([&] { return sender_->stats().requests == 1; }, 10));
    EXPECT_FALSE(channel.answered(9, 0, 2000)) << "answered while the only thread that may send was held";
    channel.release_push();  // the migration thread serves it between the push's runs
    ASSERT_TRUE(eventually([&] { return channel.answered(9, 0, 2000); }, 10));
}

TEST_P(PostcopySenderTest, PagesTheDestinationFetchesItselfAreCountedHeldNotPushed) {
    start_on_channel(true, {.max_bandwidth = 0, .readahead_pages = 0});
    FakeChannel& channel = *channel_;
    channel.fetch_below(1024);
    channel.release_push();
    ASSERT_TRUE(eventually([&] { return sender_->remaining_pages() == 0; }, 30));
    channel.say_done();
    ASSERT_TRUE(finish());
    PostcopyStats st = sender_->stats();
    EXPECT_EQ(st.held_pages, 1024u) << "the pages the channel held back are the destination's to fetch";
    EXPECT_EQ(st.background_pages, kPages - 1024) << "held pages were counted as pushed";
    EXPECT_GT(st.source_cpu_ms, 0.0) << "the source's CPU time in postcopy was not measured";
}

TEST_P(PostcopySenderTest, ANewCapAppliesToThePushUnderWay) {
    start({.max_bandwidth = kCrawl, .readahead_pages = 0});  // at this pace the 8 MiB take two minutes
    ASSERT_TRUE(eventually([&] { return dest_->arrived(0, 0); }, 10));
    live_.set(Live::max_postcopy_bandwidth, 0);  // max-postcopy-bandwidth 0: unlimited
    ASSERT_TRUE(eventually([&] { return sender_->remaining_pages() == 0; }, 30))
        << sender_->remaining_pages() << " pages still missing: the push kept its old cap";
    EXPECT_EQ(dest_->wrong_bytes(), 0u);
}

TEST_P(PostcopySenderTest, ANewReadaheadAppliesToThePushUnderWay) {
    start({.max_bandwidth = 4096, .readahead_pages = 0});  // a page a second, and no window
    ASSERT_TRUE(eventually([&] { return dest_->arrived(0, 0); }, 10));
    live_.set(Live::postcopy_readahead, 64 * 4096);  // x-postcopy-readahead 256 KiB
    request(conns_[0], 0, 1001);
    ASSERT_TRUE(eventually([&] { return dest_->arrived(0, 1001); }, 10));
    request(conns_[0], 0, 1002);  // in order: now a window of 16 pages past it
    ASSERT_TRUE(eventually([&] { return dest_->arrived(0, 1018); }, 10)) << "no window opened: the old maximum held";
    EXPECT_EQ(dest_->wrong_bytes(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Streams, PostcopySenderTest, ::testing::Values(Streams::socket, Streams::pipe),
                         [](const ::testing::TestParamInfo<Streams>& i) { return i.param == Streams::socket ? "socket" : "pipe"; });

}  // namespace
}  // namespace vmm::migration::test

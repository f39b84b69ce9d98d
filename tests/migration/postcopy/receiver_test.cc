// PostcopyReceiver against a scripted stream: pages land only where guest RAM lacks them,
// never outside guest RAM and never over a page already present; a fault on a missing page
// becomes one request, a fault on a page known to be zero is settled without asking.
#include "vmm/migration/postcopy/receiver.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstring>
#include <functional>
#include <thread>

#include "tests/support/require.h"
#include "tests/support/memory_fixture.h"
#include "tests/support/wait.h"
#include "vmm/migration/postcopy/recovery.h"
#include "vmm/migration/transport/postcopy_stream.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/return_path.h"

namespace vmm::migration::test {

namespace {


std::vector<uint8_t> operator+(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

Record range(RecordType t, uint32_t block, uint64_t first_page, uint64_t pages) {
    Record r;
    r.type = t;
    r.block = block;
    r.offset = first_page * 4096;
    r.length = pages * 4096;
    return r;
}

std::vector<uint8_t> pages_record(uint32_t block, uint64_t first_page, uint64_t pages, uint8_t fill) {
    auto bytes = encode_record(range(RecordType::pages, block, first_page, pages));
    bytes.resize(bytes.size() + pages * 4096, fill);
    return bytes;
}

// Postcopy over `main` (and a preempt connection, cut by `cut`), as the socket transports carry it.
std::unique_ptr<DestPostcopyLink> on(stream::ByteStream& main, std::vector<BlockInfo> blocks, stream::ByteStream* preempt = nullptr,
                                     std::function<void()> cut = {}) {
    return stream_postcopy_dest(main, preempt, std::move(cut), {std::move(blocks)});
}

std::vector<uint8_t> end_record() {
    Record r;
    r.type = RecordType::end;
    return encode_record(r);
}

}  // namespace

TEST(PostcopyReceiver, PlacesWhatIsMissingAndNothingElse) {
    VMM_REQUIRE(need::userfaultfd());
    auto mem = make_memory();
    uint8_t* ram = mem.blocks()[0]->host();
    std::memset(ram + 10 * 4096, 0x5a, 4096);  // present before the switch: the guest's own
    // Pages 0-3 missing; a page of 'high' missing too. The stream: data for 0-1, zero for 2-3,
    // a record over the present page 10 (must be skipped), the 'high' page, END.
    stream::MemoryStream stream(pages_record(0, 0, 2, 0xab) + encode_record(range(RecordType::zero, 0, 2, 2)) +
                        pages_record(0, 10, 1, 0xee) + pages_record(1, 5, 1, 0xcd) + end_record());
    PostcopyReceiver rx(mem, stream, on(stream, layout(mem)), layout(mem), {}, false);
    ASSERT_TRUE(rx.prepare({range(RecordType::discard, 0, 0, 4), range(RecordType::discard, 1, 5, 1)}));
    auto s = rx.run();
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_EQ(ram[0], 0xab);
    EXPECT_EQ(ram[2 * 4096 - 1], 0xab);
    EXPECT_EQ(ram[2 * 4096], 0);
    EXPECT_EQ(ram[10 * 4096], 0x5a) << "a page present at the switch was overwritten";
    EXPECT_EQ(mem.blocks()[1]->host()[5 * 4096], 0xcd);
    EXPECT_TRUE(rx.complete());
    PostcopyStats st = rx.stats();
    EXPECT_EQ(st.missing_pages, 5u);
    EXPECT_EQ(st.placed, 5u);
    // The answer: POSTCOPY_DONE, once.
    ASSERT_EQ(stream.written().size(), 1u);
    EXPECT_EQ(stream.written()[0], static_cast<uint8_t>(ReturnType::postcopy_done));
}

TEST(PostcopyReceiver, AHostilePageOutsideGuestRamIsRefusedBeforeAnythingIsPlaced) {
    VMM_REQUIRE(need::userfaultfd());
    auto mem = make_memory();
    Record outside = range(RecordType::pages, 0, 8 * M / 4096, 1);  // just past the end of 'pc.ram'
    auto bytes = encode_record(outside);
    bytes.resize(bytes.size() + 4096, 0xff);
    Record bad_block = range(RecordType::zero, 7, 0, 1);
    for (const auto& stream_bytes : {bytes, encode_record(bad_block), pages_record(0, 0, 1, 1) + encode_record([] {
                                         Record r;
                                         r.type = RecordType::round_begin;
                                         return r;
                                     }())}) {
        stream::MemoryStream stream(stream_bytes);
        PostcopyReceiver rx(mem, stream, on(stream, layout(mem)), layout(mem), {}, false);
        ASSERT_TRUE(rx.prepare({range(RecordType::discard, 0, 0, 1)}));
        auto s = rx.run();
        ASSERT_FALSE(s);
        EXPECT_TRUE(s.error().message().find("outside") != std::string::npos ||
                    s.error().message().find("block index") != std::string::npos ||
                    s.error().message().find("in postcopy") != std::string::npos)
            << s.error().message();
        EXPECT_TRUE(stream.written().empty()) << "no POSTCOPY_DONE after a refused stream";
    }
}

// A link that authenticates every page itself (as the rdma plugin's tags do on an authenticated
// connection) brings pages without verify-ram's sums, and they are placed; the same pages from a
// link that does not are refused under verify-ram.
TEST(PostcopyReceiver, PagesWithoutSumsAreTakenUnderVerifyOnlyFromALinkThatAuthenticatesThem) {
    VMM_REQUIRE(need::userfaultfd());
    struct Authenticating final : DestPostcopyLink {
        explicit Authenticating(std::unique_ptr<DestPostcopyLink> l) : inner(std::move(l)) {}
        Status begin() override { return inner->begin(); }
        Status request(uint32_t block, uint64_t offset) override { return inner->request(block, offset); }
        Result<PostcopyPages> next(Lane lane) override { return inner->next(lane); }
        Status release(const PostcopyPages& pages) override { return inner->release(pages); }
        Status done() override { return inner->done(); }
        bool authenticates_pages() const override { return true; }
        std::unique_ptr<DestPostcopyLink> inner;
    };
    for (bool authenticating : {true, false}) {
        auto mem = make_memory();
        stream::MemoryStream stream(pages_record(0, 0, 2, 0xab) + end_record());
        auto link = on(stream, layout(mem));
        if (authenticating) link = std::make_unique<Authenticating>(std::move(link));
        PostcopyReceiver rx(mem, stream, std::move(link), layout(mem), {}, true);
        ASSERT_TRUE(rx.prepare({range(RecordType::discard, 0, 0, 2)}));
        auto s = rx.run();
        if (authenticating) {
            ASSERT_TRUE(s) << s.error().message();
            EXPECT_EQ(mem.blocks()[0]->host()[4096], 0xab);
        } else {
            ASSERT_FALSE(s);
            EXPECT_NE(s.error().message().find("without their sums"), std::string::npos) << s.error().message();
        }
    }
}

// postcopy-preempt: pages on the second connection are placed too, the main END waits for its
// END; a record there that is not PAGES / ZERO / END, or a connection that ends without END,
// fails the run with the preempt connection named, and cuts it.
TEST(PostcopyReceiver, PreemptPagesArePlacedAndAHostilePreemptConnectionIsRefused) {
    VMM_REQUIRE(need::userfaultfd());
    auto mem = make_memory();
    uint8_t* ram = mem.blocks()[0]->host();
    stream::MemoryStream main_stream(pages_record(0, 0, 1, 0x11) + end_record());
    stream::MemoryStream preempt(pages_record(0, 1, 1, 0x22) + end_record());
    int cuts = 0;
    PostcopyReceiver rx(mem, main_stream, on(main_stream, layout(mem), &preempt, [&] { ++cuts; }), layout(mem), {}, false);
    ASSERT_TRUE(rx.prepare({range(RecordType::discard, 0, 0, 2)}));
    auto s = rx.run();
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_EQ(ram[0], 0x11);
    EXPECT_EQ(ram[4096], 0x22);
    EXPECT_EQ(rx.stats().preempt_pages, 1u);
    EXPECT_EQ(cuts, 0);

    Record state;
    state.type = RecordType::state;
    state.length = 1;
    for (const auto& hostile : {encode_record(state) + std::vector<uint8_t>{0}, pages_record(0, 1, 1, 0x33)}) {
        auto fresh = make_memory();
        stream::MemoryStream m(pages_record(0, 0, 2, 0x44) + end_record());
        stream::MemoryStream p(hostile);  // a STATE record; then a page and no END
        int cut = 0;
        PostcopyReceiver r2(fresh, m, on(m, layout(fresh), &p, [&] { ++cut; }), layout(fresh), {}, false,
                            std::chrono::milliseconds(2000));
        ASSERT_TRUE(r2.prepare({range(RecordType::discard, 0, 0, 2)}));
        auto f = r2.run();
        ASSERT_FALSE(f);
        EXPECT_NE(f.error().message().find("postcopy-preempt connection"), std::string::npos) << f.error().message();
        EXPECT_TRUE(m.written().empty()) << "no POSTCOPY_DONE after a refused preempt connection";
    }
}

TEST(PostcopyReceiver, EndWithPagesStillMissingIsRefused) {
    VMM_REQUIRE(need::userfaultfd());
    auto mem = make_memory();
    stream::MemoryStream stream(pages_record(0, 0, 1, 1) + end_record());
    PostcopyReceiver rx(mem, stream, on(stream, layout(mem)), layout(mem), {}, false);
    ASSERT_TRUE(rx.prepare({range(RecordType::discard, 0, 0, 2)}));
    auto s = rx.run();
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message().find("1 pages still missing"), std::string::npos) << s.error().message();
}

// A thread touching a missing page sleeps until its page is placed, after exactly one request;
// touching a page the source never sent (zero there) costs no request at all.
TEST(PostcopyReceiver, AFaultOnAMissingPageIsRequestedOnceAndAZeroPageNever) {
    VMM_REQUIRE(need::userfaultfd());
    auto mem = make_memory();
    uint8_t* ram = mem.blocks()[0]->host();
    stream::MemoryStream stream(pages_record(0, 3, 1, 0x77) + end_record());
    PostcopyReceiver rx(mem, stream, on(stream, layout(mem)), layout(mem), {}, false);
    ASSERT_TRUE(rx.prepare({range(RecordType::discard, 0, 3, 1)}));
    EXPECT_EQ(ram[100 * 4096 + 8], 0) << "a never-sent page reads as zero";
    // (the fault thread counts it just after the reader woke)
    EXPECT_TRUE(vmm::test::wait_for([&] { return rx.stats().zero_local == 1; }, std::chrono::seconds(10)));
    EXPECT_EQ(rx.stats().requests, 0u);
    uint8_t seen = 0;
    std::thread toucher([&] { seen = *reinterpret_cast<volatile uint8_t*>(ram + 3 * 4096 + 1); });
    EXPECT_TRUE(vmm::test::wait_for([&] { return rx.stats().requests == 1; }, std::chrono::seconds(10)));
    auto s = rx.run();
    toucher.join();
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_EQ(seen, 0x77);
    PostcopyStats st = rx.stats();
    EXPECT_EQ(st.requests, 1u);
    EXPECT_EQ(st.fault_latency.count, 1u);
    EXPECT_GT(st.fault_latency.max_us, 0.0);
    // The request went out before POSTCOPY_DONE: PAGE_REQUEST(block 0, offset 0x3000, 4096).
    auto request = encode_page_request(0, 3 * 4096, 4096);
    ASSERT_GE(stream.written().size(), request.size() + 1);
    EXPECT_TRUE(std::equal(request.begin(), request.end(), stream.written().begin()));
}

// A link that fetches a faulted page itself (the rdma plugin's READ awaited on the fault
// thread) hands it back from fetch(): it is placed there and released, the vCPU goes on, and
// nothing is asked of the source; a page fetch() leaves to the lanes comes as an answer would.
TEST(PostcopyReceiver, APageTheLinkFetchesItselfIsPlacedOnTheFaultThreadAndReleased) {
    VMM_REQUIRE(need::userfaultfd());
    struct Fetching final : DestPostcopyLink {
        explicit Fetching(std::unique_ptr<DestPostcopyLink> l) : inner(std::move(l)) { page.fill(0x3c); }
        Status begin() override { return inner->begin(); }
        Status request(uint32_t block, uint64_t offset) override { return inner->request(block, offset); }
        Result<std::optional<PostcopyPages>> fetch(uint32_t block, uint64_t offset) override {
            if (offset != 3 * 4096) return DestPostcopyLink::fetch(block, offset);
            PostcopyPages p;
            p.kind = PostcopyPages::Kind::data, p.block = block, p.offset = offset, p.pages = 1, p.token = 77;
            p.data = page.data();
            return std::optional<PostcopyPages>{p};
        }
        Result<PostcopyPages> next(Lane lane) override { return inner->next(lane); }
        Status release(const PostcopyPages& p) override {
            if (p.token == 77) released.push_back(p.offset);
            return inner->release(p);
        }
        Status done() override { return inner->done(); }
        std::unique_ptr<DestPostcopyLink> inner;
        std::array<uint8_t, 4096> page{};
        std::vector<uint64_t> released;  // the fault thread's, read once it has joined
    };
    auto mem = make_memory();
    uint8_t* ram = mem.blocks()[0]->host();
    stream::MemoryStream stream(pages_record(0, 4, 1, 0x77) + end_record());
    auto link = std::make_unique<Fetching>(on(stream, layout(mem)));
    Fetching* fetching = link.get();
    PostcopyReceiver rx(mem, stream, std::move(link), layout(mem), {}, false);
    ASSERT_TRUE(rx.prepare({range(RecordType::discard, 0, 3, 2)}));
    std::atomic<int> seen = -1;
    std::thread toucher([&] { seen = *reinterpret_cast<volatile uint8_t*>(ram + 3 * 4096 + 9); });
    // Woken by the fault thread's own placing: no arrival is read before run().
    bool woke = vmm::test::wait_for([&] { return seen != -1; }, std::chrono::seconds(10));
    if (!woke) rx.close();  // the toucher then reads the zero page
    toucher.join();
    ASSERT_TRUE(woke) << "the fetched page was not placed by the fault thread";
    EXPECT_EQ(seen, 0x3c);
    uint8_t next_seen = 0;
    std::thread second([&] { next_seen = *reinterpret_cast<volatile uint8_t*>(ram + 4 * 4096); });
    EXPECT_TRUE(vmm::test::wait_for([&] { return rx.stats().requests == 2; }, std::chrono::seconds(10)));
    auto s = rx.run();
    second.join();
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_EQ(next_seen, 0x77);
    rx.close();
    EXPECT_EQ(fetching->released, std::vector<uint64_t>{3 * 4096});
    PostcopyStats st = rx.stats();
    EXPECT_EQ(st.placed, 2u);
    EXPECT_EQ(st.fault_latency.count, 2u);
    // Only page 4 was asked of the source: PAGE_REQUEST(block 0, offset 0x4000), then POSTCOPY_DONE.
    auto request = encode_page_request(0, 4 * 4096, 4096);
    ASSERT_EQ(stream.written().size(), request.size() + 1);
    EXPECT_TRUE(std::equal(request.begin(), request.end(), stream.written().begin()));
}

// The link breaks with page 3 still missing while a thread waits on it: after resume() on a
// new stream the source first learns which pages are here (5 arrived before the break, 3 did
// not), then hears the unanswered request again, and the page it sends lands.
TEST(PostcopyReceiver, AfterABrokenLinkResumeDescribesWhatIsHereAndAsksAgain) {
    VMM_REQUIRE(need::userfaultfd());
    auto mem = make_memory();
    uint8_t* ram = mem.blocks()[0]->host();
    stream::MemoryStream broken(pages_record(0, 5, 1, 0x11));  // then the link ends mid-postcopy
    PostcopyReceiver rx(mem, broken, on(broken, layout(mem)), layout(mem), {}, false);
    ASSERT_TRUE(rx.prepare({range(RecordType::discard, 0, 3, 1), range(RecordType::discard, 0, 5, 1)}));
    ASSERT_FALSE(rx.run());
    rx.detach();
    uint8_t seen = 0;
    std::thread toucher([&] { seen = *reinterpret_cast<volatile uint8_t*>(ram + 3 * 4096 + 1); });
    EXPECT_TRUE(vmm::test::wait_for([&] { return rx.stats().requests == 1; }, std::chrono::seconds(10)));
    stream::MemoryStream resumed(pages_record(0, 3, 1, 0x77) + end_record());
    ASSERT_TRUE(rx.resume(resumed, on(resumed, layout(mem)), std::chrono::seconds(30)));
    auto s = rx.run();
    toucher.join();
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_EQ(seen, 0x77);
    EXPECT_EQ(ram[5 * 4096], 0x11);
    EXPECT_EQ(rx.stats().recoveries, 1u);
    // What the source read: every page described (3 missing, 5 held), the request, POSTCOPY_DONE.
    stream::MemoryStream source_side(resumed.written());
    ReceivedPages held(layout(mem));
    while (!held.complete()) {
        auto m = read_return(source_side, layout(mem), 4096);
        ASSERT_TRUE(m) << m.error().message();
        ASSERT_TRUE(held.add(m->message, m->words));
    }
    EXPECT_EQ(held.bits()[0][0] & 0b101000, 0b100000u) << "page 5 held, page 3 not";
    auto request = read_return(source_side, layout(mem), 4096);
    ASSERT_TRUE(request) << request.error().message();
    EXPECT_EQ(request->message.type, ReturnType::page_request);
    EXPECT_EQ(request->message.offset, 3u * 4096);
    auto done = read_return(source_side, layout(mem), 4096);
    ASSERT_TRUE(done);
    EXPECT_EQ(done->message.type, ReturnType::postcopy_done);
}

}  // namespace vmm::migration::test

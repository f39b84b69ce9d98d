// Postcopy's two ends as every transport carries them: one interface per direction (Cloud
// Hypervisor's vm-migration has one trait per direction likewise). The postcopy engine
// (postcopy/sender.h, receiver.h) drives a link and never asks what is under it.
//
// Two implementations:
// - the byte stream (postcopy_stream.h): pages as PAGES / ZERO records, requests and DONE on
//   the stream's reverse direction, and with postcopy-preempt a second connection that carries
//   the answers to requests, apart from the background push;
// - a transport's own channel (plugin_transport.cc, the RDMA plugin): a request is a SEND, its
//   page comes back as one RDMA WRITE into a slot the destination registered.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

// Pages the destination receives (and a channel sends): a run of data or zero pages of one
// block, or the source's END.
struct PostcopyPages {
    enum class Kind { data, zero, end } kind = Kind::end;  // end: every page has been sent
    uint32_t block = 0;
    uint64_t offset = 0;  // in the block
    uint32_t pages = 0;   // 1..kMaxPages over a channel; a stream's record may hold more
    uint32_t token = 0;   // the link's: what release() needs
    const uint8_t* data = nullptr;   // destination, data: valid until release()
    std::span<const uint64_t> sums;  // verify-ram's, one per page (or none)
    static constexpr uint32_t kMaxPages = 16;  // a channel's longest run
};

// A run of one block's pages the source sends: all data or all zero.
struct PageRun {
    uint32_t block = 0;
    uint64_t first_page = 0;
    uint64_t count = 0;
    bool zero = false;
    const uint8_t* host = nullptr;  // the run's first page in guest RAM
};

// What the destination asks: pages its guest waits on, or its word that every page is there.
struct PostcopyRequest {
    bool done = false;
    uint32_t block = 0;
    uint64_t first_page = 0, count = 0;
    std::optional<uint32_t> token;  // a channel's: given back with the answer
    // Not a request: the destination holds [first_page, first_page + count) already (it read
    // them itself, by RDMA READ): push none of them.
    bool held = false;
    static PostcopyRequest all_placed() {  // the destination's word: every page is there
        PostcopyRequest r;
        r.done = true;
        return r;
    }
};

// What both ends of a link know of the migration.
struct PostcopyLinkConfig {
    std::vector<BlockInfo> blocks;  // guest RAM's layout, agreed in the header
    bool verify = false;            // verify-ram: every data page travels with its sum
};

class SourcePostcopyLink {
public:
    // Which thread sends: the background push (the migration thread, which also answers when
    // the link's answers do not come from the return path's thread), or an answer from the
    // return path's thread (answers().beside_push).
    enum class Path { push, answer };
    struct Answers {
        bool beside_push = false;     // the return path's thread answers each request at once
        bool own_connection = false;  // ... on a connection of its own (postcopy-preempt): a page
                                      // sent already goes again, its first copy may queue behind the push
        bool once = false;            // a page may arrive only once: taken off what is missing as
                                      // a thread picks it, before it goes
    };
    virtual ~SourcePostcopyLink() = default;
    // Migration thread, once the destination runs the guest (again after a recovery).
    virtual Status begin() = 0;
    // Return path's thread: the next request or DONE, or nothing within `wait`.
    virtual Result<std::optional<PostcopyRequest>> next_request(std::chrono::milliseconds wait) = 0;
    // Sends `run` (at most longest_run() pages) on `path`, answering request `token` if given;
    // returns the bytes it put on the wire, or kHeld: a push the destination fetches itself
    // (a transport whose destination reads the push by RDMA READ), nothing sent. One thread per
    // path at a time.
    static constexpr uint64_t kHeld = UINT64_MAX;
    virtual Result<uint64_t> send(Path path, const PageRun& run, std::optional<uint32_t> token) = 0;
    // What went on `path` leaves now.
    virtual Status flush(Path path) = 0;
    // Every page has gone; no answer follows (the sender sees to it).
    virtual Status end() = 0;
    virtual Answers answers() const = 0;
    virtual uint64_t longest_run() const { return UINT64_MAX; }
};

class DestPostcopyLink {
public:
    // Where pages arrive: everything on the main lane, or the answers to requests on a lane of
    // their own (answers_apart()), each lane read by a thread of its own.
    enum class Lane { main, answers };
    virtual ~DestPostcopyLink() = default;
    // Before the guest runs here (again at a recovery).
    virtual Status begin() = 0;
    virtual bool answers_apart() const { return false; }
    // Fault thread (one writer at a time with done(): the receiver's lock): asks for a page.
    virtual Status request(uint32_t block, uint64_t offset) = 0;
    // Fault thread, as request(); a link that fetches the page itself (the rdma plugin's READ)
    // may wait for it and return it here, for the caller to place and then release(). nullopt:
    // the page comes on a lane, as an answer does.
    virtual Result<std::optional<PostcopyPages>> fetch(uint32_t block, uint64_t offset) {
        if (auto s = request(block, offset); !s) return s.error();
        return std::optional<PostcopyPages>{};
    }
    // The lane's next arrival, checked against the blocks: pages, or END. Waits as long as
    // it takes (the answers' lane is silent while the guest touches nothing missing).
    virtual Result<PostcopyPages> next(Lane lane) = 0;
    // Once `pages` are placed.
    virtual Status release(const PostcopyPages& pages) = 0;
    // After END, every page placed: tells the source.
    virtual Status done() = 0;
    // The receiver ends early: the answers' lane's next() fails from now on.
    virtual void cut() {}
    // Whether the link authenticates every page itself (the rdma plugin's tags on an
    // authenticated connection): its pages then come without verify-ram's sums, which the
    // tag stands in for.
    virtual bool authenticates_pages() const { return false; }
};

}  // namespace vmm::migration

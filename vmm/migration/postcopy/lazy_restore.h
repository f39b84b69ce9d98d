// LazyRestore: a restore from a file whose guest runs before its RAM is in (x-restore-lazy).
// Before the guest runs (prepare): guest RAM is registered with userfaultfd and emptied, so the
// first touch of any page (a vCPU inside KVM, or the VMM's own threads) faults, and the fault
// thread (FaultHandler) passes each fault on as a request. After GO (run, on the incoming
// thread): requests first, each a window of pages from the faulting one on, read from the file,
// checked against their sums and placed (UFFDIO_COPY); between requests the rest in file order,
// a piece at a time, the file's holes as zero pages (UFFDIO_ZEROPAGE). Placing never overwrites,
// so a page one path placed is skipped by the other. It is postcopy with the file as the source:
// the same fault thread, the same figures (faults, their latency, the guest's blocked time).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "vmm/memory/guest_memory.h"
#include "vmm/migration/core/stats.h"
#include "vmm/migration/postcopy/fault_handler.h"
#include "vmm/migration/postcopy/missing_pages.h"
#include "vmm/migration/postcopy/userfault.h"
#include "vmm/stream/cancel.h"
#include "vmm/migration/transport/file_ram.h"
#include "vmm/migration/transport/transport.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

class LazyRestore {
public:
    static constexpr uint64_t kFaultWindow = 64 << 10;  // read for one fault: a disk read of 64 KiB costs what 4 KiB does
    static constexpr uint64_t kPiece = 1 << 20;         // the background fill's read (unless the file says)

    // `blocks`: this machine's layout; `cancel`: the incoming migration's (run() returns at once).
    LazyRestore(const memory::GuestMemory& mem, std::vector<BlockInfo> blocks, std::vector<uint32_t> vcpu_tids,
                LazyFileRam file, stream::CancelToken& cancel);
    ~LazyRestore();  // stops the fault thread
    LazyRestore(const LazyRestore&) = delete;
    LazyRestore& operator=(const LazyRestore&) = delete;

    Status prepare();
    // Until every page is placed, or the first error (a damaged page, a read that failed).
    Status run();
    // Every page is in: the fault thread stops and guest RAM is an ordinary mapping again.
    void close();
    PostcopyStats stats() const;

private:
    struct Request {
        uint32_t block;
        uint64_t offset;
    };
    Status serve(const Request& r);
    Status fill_next();
    Status place(uint32_t block, uint64_t offset, uint64_t length, bool background);
    Status place_zero(uint32_t block, uint64_t from, uint64_t to);
    uint64_t piece() const { return file_.piece != 0 ? file_.piece : kPiece; }
    bool next_request(Request& out);

    const memory::GuestMemory& mem_;
    std::vector<BlockInfo> blocks_;
    std::vector<uint32_t> vcpu_tids_;
    LazyFileRam file_;
    stream::CancelToken& cancel_;
    std::unique_ptr<Userfault> uffd_;
    std::unique_ptr<MissingPages> missing_;
    std::unique_ptr<FaultHandler> faults_;
    std::vector<uint8_t> buffer_;

    // The background fill's place: block, its data extents, the extent and the offset in it.
    struct Cursor {
        uint32_t block = 0;
        std::vector<std::pair<uint64_t, uint64_t>> extents;
        size_t extent = 0;
        uint64_t at = 0;      // next offset to fill in the block
        bool listed = false;  // extents read for this block
    } cursor_;

    std::mutex requests_mutex_;  // the fault thread's requests, taken by run() before the fill
    std::deque<Request> requests_;

    mutable std::mutex stats_mutex_;
    uint64_t background_ = 0;  // pages placed by the fill
    uint64_t bytes_ = 0;       // bytes read from the file
};

}  // namespace vmm::migration

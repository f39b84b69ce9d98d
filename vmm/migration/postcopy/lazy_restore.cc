#include "vmm/migration/postcopy/lazy_restore.h"

#include <sys/mman.h>

#include <algorithm>

#include <fmt/format.h>

namespace vmm::migration {

LazyRestore::LazyRestore(const memory::GuestMemory& mem, std::vector<BlockInfo> blocks, std::vector<uint32_t> vcpu_tids,
                         LazyFileRam file, stream::CancelToken& cancel)
    : mem_(mem), blocks_(std::move(blocks)), vcpu_tids_(std::move(vcpu_tids)), file_(std::move(file)), cancel_(cancel) {}

LazyRestore::~LazyRestore() { close(); }

Status LazyRestore::prepare() {
    if (blocks_.size() != mem_.blocks().size()) return Error("internal: a lazy restore without every RAM block");
    std::vector<uint8_t*> hosts;
    auto uffd = userfault_over(mem_, hosts);
    if (!uffd) return uffd.error();
    uffd_ = std::move(*uffd);
    for (const auto& b : mem_.blocks()) {
        // Whatever was populated before (nothing was read into it) goes, so that every first touch faults.
        if (::madvise(b->host(), b->size(), MADV_DONTNEED) != 0) {
            return Error::from_errno("emptying guest RAM for a lazy restore (madvise)");
        }
    }
    missing_ = std::make_unique<MissingPages>(blocks_, hosts);
    for (uint32_t i = 0; i < blocks_.size(); ++i) missing_->add(i, 0, blocks_[i].size / kStreamPageSize);
    buffer_.resize(std::max({piece(), kFaultWindow}));
    faults_ = std::make_unique<FaultHandler>(*uffd_, *missing_, vcpu_tids_, [this](uint32_t block, uint64_t offset, uint32_t) {
        std::lock_guard lock(requests_mutex_);
        requests_.push_back({block, offset});
        return Status{};
    });
    return faults_->start();
}

void LazyRestore::close() {
    if (faults_) faults_->stop();
    uffd_.reset();
    file_ = LazyFileRam{};  // what it read from goes now (a pull's server hears it is done)
}

bool LazyRestore::next_request(Request& out) {
    std::lock_guard lock(requests_mutex_);
    if (requests_.empty()) return false;
    out = requests_.front();
    requests_.pop_front();
    return true;
}

Status LazyRestore::run() {
    while (missing_->remaining() != 0) {
        if (cancel_.cancelled()) return Error("the lazy restore was cancelled");
        Request r{};
        if (next_request(r)) {
            if (auto s = serve(r); !s) return s;
            continue;
        }
        if (cursor_.block < blocks_.size()) {
            if (auto s = fill_next(); !s) return s;
            continue;
        }
        // Every page was placed once by the fill, so nothing can be missing here.
        return Error(fmt::format("internal: a lazy restore left {} pages unplaced", missing_->remaining()));
    }
    return {};
}

// A fault's page and the window after it, within its block.
Status LazyRestore::serve(const Request& r) {
    uint64_t end = std::min(blocks_[r.block].size, r.offset + kFaultWindow);
    return place(r.block, r.offset, end - r.offset, false);
}

// The next piece of the fill: a hole before the cursor's extent as zero pages, else up to piece()
// of the extent; past a block's last extent, its tail as zero pages and on to the next block.
Status LazyRestore::fill_next() {
    Cursor& c = cursor_;
    if (!c.listed) {
        auto extents = file_.extents(c.block);
        if (!extents) return extents.error();
        c.extents = std::move(*extents);
        c.extent = 0;
        c.at = 0;
        c.listed = true;
    }
    const uint64_t size = blocks_[c.block].size;
    if (c.extent == c.extents.size()) {
        if (auto s = place_zero(c.block, c.at, size); !s) return s;
        uint32_t next = c.block + 1;
        c = Cursor{};
        c.block = next;
        return {};
    }
    auto [from, to] = c.extents[c.extent];
    if (to > size || from > to || c.at > to) {  // the fill is before its extent, or in it
        return Error(fmt::format("internal: a lazy restore's extent {} of {}, [{:#x}, {:#x}) of block {}, is out of order "
                                 "(the fill is at {:#x})",
                                 c.extent, c.extents.size(), from, to, c.block, c.at));
    }
    if (c.at < from) {
        if (auto s = place_zero(c.block, c.at, from); !s) return s;
        c.at = from;
        return {};
    }
    uint64_t n = std::min(piece(), to - c.at);
    if (auto s = place(c.block, c.at, n, true); !s) return s;
    c.at += n;
    if (c.at == to) ++c.extent;
    return {};
}

Status LazyRestore::place(uint32_t block, uint64_t offset, uint64_t length, bool background) {
    if (length == 0) return {};
    std::span<uint8_t> into(buffer_.data(), length);
    if (auto s = file_.read(block, offset, into); !s) return s;
    uint8_t* host = missing_->host(block, offset / kStreamPageSize);
    auto n = uffd_->copy(host, into.data(), length);
    if (!n) return n.error().context("placing restored pages (UFFDIO_COPY)");
    if (*n == 0) (void)uffd_->wake(host, length);  // present already: a vCPU may still wait on the fault it raised
    uint64_t first = offset / kStreamPageSize, count = length / kStreamPageSize;
    missing_->placed(block, first, count);
    faults_->placed(block, first, count);
    std::lock_guard lock(stats_mutex_);
    bytes_ += length;
    if (background) background_ += *n;
    return {};
}

Status LazyRestore::place_zero(uint32_t block, uint64_t from, uint64_t to) {
    if (to <= from) return {};
    uint8_t* host = missing_->host(block, from / kStreamPageSize);
    auto n = uffd_->zero(host, to - from);
    if (!n) return n.error().context("placing restored zero pages (UFFDIO_ZEROPAGE)");
    uint64_t first = from / kStreamPageSize, count = (to - from) / kStreamPageSize;
    missing_->placed(block, first, count);
    faults_->placed(block, first, count);
    std::lock_guard lock(stats_mutex_);
    background_ += *n;
    return {};
}

PostcopyStats LazyRestore::stats() const {
    PostcopyStats s = fault_stats(missing_.get(), faults_.get());
    std::lock_guard lock(stats_mutex_);
    s.background_pages = background_;
    s.postcopy_bytes = bytes_;
    return s;
}

}  // namespace vmm::migration

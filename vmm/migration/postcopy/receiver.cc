#include "vmm/migration/postcopy/receiver.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include "vmm/common/thread_name.h"
#include "vmm/migration/postcopy/recovery.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/page_sums.h"
#include "vmm/migration/wire/return_path.h"

namespace vmm::migration {

PostcopyReceiver::PostcopyReceiver(const memory::GuestMemory& mem, ByteStream& stream, DestPostcopyChannel* channel,
                                   std::vector<BlockInfo> blocks, std::vector<uint32_t> vcpu_tids, bool verify)
    : mem_(mem), stream_(&stream), channel_(channel), blocks_(std::move(blocks)), vcpu_tids_(std::move(vcpu_tids)), verify_(verify) {}

PostcopyReceiver::~PostcopyReceiver() {
    (void)join_preempt(true);
    if (faults_) faults_->stop();
}

void PostcopyReceiver::use_preempt(ByteStream* preempt, std::function<void()> cut, std::chrono::milliseconds end_within) {
    preempt_ = preempt;
    cut_preempt_ = std::move(cut);
    preempt_end_within_ = end_within;
}

Status PostcopyReceiver::send(std::span<const uint8_t> bytes) {
    std::lock_guard lock(write_mutex_);
    return send_locked(bytes);
}

Status PostcopyReceiver::send_locked(std::span<const uint8_t> bytes) {
    if (!attached_) return Error("the link to the source is down");
    if (auto s = stream_->write(bytes); !s) return s;
    return stream_->flush();
}

// Under write_mutex_: detach() waits for a request in progress before the link goes.
Status PostcopyReceiver::request(uint32_t block, uint64_t offset) {
    std::lock_guard lock(write_mutex_);
    if (attached_ && channel_ != nullptr) return channel_->request(block, offset);
    return send_locked(encode_page_request(block, offset, kStreamPageSize));
}

Status PostcopyReceiver::prepare(const std::vector<Record>& discards) {
    // The transport's channel first: it lets go of what it registered of guest RAM for precopy.
    if (channel_ != nullptr)
        if (auto s = channel_->begin(); !s) return s;
    auto uffd = Userfault::open();
    if (!uffd) return uffd.error();
    uffd_ = std::make_unique<Userfault>(std::move(*uffd));
    std::vector<uint8_t*> hosts;
    for (const auto& b : mem_.blocks()) {
        hosts.push_back(b->host());
        if (auto s = uffd_->register_range(b->host(), b->size()); !s) return s;
    }
    missing_ = std::make_unique<MissingPages>(blocks_, hosts);
    for (const Record& d : discards) {
        // What precopy put there is stale: dropped, so the guest's first touch faults.
        if (::madvise(hosts[d.block] + d.offset, d.length, MADV_DONTNEED) != 0) {
            return Error::from_errno("dropping stale guest pages for postcopy (madvise)");
        }
        missing_->add(d.block, d.offset / kStreamPageSize, d.length / kStreamPageSize);
    }
    faults_ = std::make_unique<FaultHandler>(*uffd_, *missing_, vcpu_tids_,
                                             [this](uint32_t block, uint64_t offset, uint32_t length) {
                                                 (void)length;  // one page: the fault handler's unit
                                                 return request(block, offset);
                                             });
    return faults_->start();
}

void PostcopyReceiver::note_placed(uint32_t block, uint64_t first_page, uint64_t count, uint64_t placed) {
    missing_->placed(block, first_page, count);
    faults_->placed(block, first_page, count);
    std::lock_guard lock(stats_mutex_);
    background_ += placed;
}

Status PostcopyReceiver::place_pages(ByteStream& in, const Record& r, std::vector<uint8_t>& buffer) {
    std::vector<uint64_t> sums;
    if (verify_ != (r.type == RecordType::pages_summed)) {
        return Error(verify_ ? "migration stream: PAGES without sums under verify-ram" : "migration stream: PAGES_SUMMED without verify-ram");
    }
    if (verify_) {
        if (auto s = read_page_sums(in, r.length, sums); !s) return s;
    }
    buffer.resize(r.length);  // at most kMaxPagesRecord: the decoder checked
    if (auto s = in.read_exact(buffer); !s) return s;
    if (auto s = check_sums(r.block, r.offset, buffer.data(), sums); !s) return s;
    uint8_t* dst = mem_.blocks()[r.block]->host() + r.offset;
    auto placed = uffd_->copy(dst, buffer.data(), r.length);
    if (!placed) return placed.error();
    note_placed(r.block, r.offset / kStreamPageSize, r.length / kStreamPageSize, *placed);
    std::lock_guard lock(stats_mutex_);
    bytes_ += r.length;
    return {};
}

Status PostcopyReceiver::check_sums(uint32_t block, uint64_t offset, const uint8_t* data,
                                    std::span<const uint64_t> sums) const {
    for (size_t i = 0; i < sums.size(); ++i) {
        // The source's guest is paused for good: a page cannot change in flight, so a mismatch is corruption.
        if (page_checksum(data + i * kStreamPageSize) != sums[i]) {
            return Error(fmt::format("RAM verification failed in postcopy: RAM block '{}' offset {:#x} arrived different "
                                     "from what the source read",
                                     blocks_[block].name, offset + i * kStreamPageSize));
        }
    }
    return {};
}

// A channel's pages, placed from where they landed (the transport checked block and range).
Status PostcopyReceiver::place_arrival(const PostcopyPages& p) {
    uint64_t length = uint64_t{p.pages} * kStreamPageSize;
    if (p.block >= blocks_.size() || p.offset % kStreamPageSize != 0 || p.offset > blocks_[p.block].size ||
        length > blocks_[p.block].size - p.offset) {
        return Error(fmt::format("the transport placed postcopy pages outside guest RAM (block {}, offset {:#x})", p.block,
                                 p.offset));
    }
    if (verify_ && p.kind == PostcopyPages::Kind::data && p.sums.size() != p.pages) {
        return Error("RDMA postcopy: pages without their sums under verify-ram");
    }
    uint8_t* dst = mem_.blocks()[p.block]->host() + p.offset;
    Result<uint64_t> placed = uint64_t{0};
    if (p.kind == PostcopyPages::Kind::zero) {
        placed = uffd_->zero(dst, length);
    } else {
        if (auto s = check_sums(p.block, p.offset, p.data, p.sums); !s) return s;
        placed = uffd_->copy(dst, p.data, length);
    }
    if (!placed) return placed.error();
    note_placed(p.block, p.offset / kStreamPageSize, p.pages, *placed);
    if (p.kind == PostcopyPages::Kind::data) {
        std::lock_guard lock(stats_mutex_);
        bytes_ += length;
    }
    return channel_->release(p);
}

Status PostcopyReceiver::run_channel() {
    for (;;) {
        if (auto f = faults_->failure(); f) return f->context("sending a page request to the source");
        auto p = channel_->next();
        if (!p) return p.error();
        if (p->kind == PostcopyPages::Kind::end) {
            if (uint64_t left = missing_->remaining(); left != 0) {
                return Error(fmt::format("the source ended postcopy with {} pages still missing here", left));
            }
            return channel_->done();
        }
        if (auto s = place_arrival(*p); !s) return s;
    }
}

Status PostcopyReceiver::place_zero(const Record& r) {
    uint8_t* dst = mem_.blocks()[r.block]->host() + r.offset;
    auto placed = uffd_->zero(dst, r.length);
    if (!placed) return placed.error();
    note_placed(r.block, r.offset / kStreamPageSize, r.length / kStreamPageSize, *placed);
    return {};
}

Status PostcopyReceiver::place_record(ByteStream& in, const Record& r, std::vector<uint8_t>& buffer) {
    switch (r.type) {
        case RecordType::pages:
        case RecordType::pages_summed: return place_pages(in, r, buffer);
        case RecordType::zero: return place_zero(r);
        default:
            return Error(fmt::format("migration stream: record {:#04x} in postcopy, where only PAGES, ZERO and END may come",
                                     static_cast<unsigned>(r.type)));
    }
}

Status PostcopyReceiver::run() {
    if (channel_ != nullptr) return run_channel();
    if (preempt_ != nullptr) {
        {
            std::lock_guard lock(preempt_mutex_);
            preempt_failure_.reset();
            preempt_ended_ = false;
        }
        preempt_thread_ = std::thread([this] { read_preempt(); });
    }
    Status s = run_stream();
    if (!s) (void)join_preempt(true);
    return s;
}

Status PostcopyReceiver::run_stream() {
    for (;;) {
        if (auto f = faults_->failure(); f) return f->context("sending a page request to the source");
        if (auto f = preempt_failure(); f) return *f;
        auto r = read_record(*stream_, blocks_, kStreamPageSize);
        if (!r) return r.error();
        if (r->type == RecordType::end) {
            // The preempt connection's END went first: every answer on it is placed once it is read.
            if (auto s = join_preempt(false); !s) return s;
            if (uint64_t left = missing_->remaining(); left != 0) {
                return Error(fmt::format("the source ended postcopy with {} pages still missing here", left));
            }
            return send(encode_postcopy_done());
        }
        if (auto s = place_record(*stream_, *r, buffer_); !s) return s;
    }
}

// postcopy-preempt's thread: the answers to requests, placed as they come, until its END. The
// connection is silent while the guest touches nothing missing, so it waits as long as it
// takes; run() cuts the connection to end it early.
void PostcopyReceiver::read_preempt() {
    name_this_thread("postcopy-preempt");
    std::vector<uint8_t> buffer;
    Status s;
    for (;;) {
        if (s = preempt_->await_readable(std::chrono::milliseconds(-1)); !s) break;
        auto r = read_record(*preempt_, blocks_, kStreamPageSize);
        if (!r) {
            s = r.error();
            break;
        }
        if (r->type == RecordType::end) {
            std::lock_guard lock(preempt_mutex_);
            preempt_ended_ = true;
            preempt_cv_.notify_all();
            return;
        }
        if (s = place_record(*preempt_, *r, buffer); !s) break;
        std::lock_guard lock(stats_mutex_);
        preempt_pages_ += r->length / kStreamPageSize;
    }
    std::lock_guard lock(preempt_mutex_);
    if (!preempt_failure_) preempt_failure_ = s.error().context("the postcopy-preempt connection");  // else: cut for it
    preempt_cv_.notify_all();
}

std::optional<Error> PostcopyReceiver::preempt_failure() {
    std::lock_guard lock(preempt_mutex_);
    return preempt_failure_;
}

Status PostcopyReceiver::join_preempt(bool cut) {
    if (!preempt_thread_.joinable()) return {};
    if (!cut) {  // the source sent its END there first; a source that did not is not waited for long
        std::unique_lock lock(preempt_mutex_);
        cut = !preempt_cv_.wait_for(lock, preempt_end_within_, [this] { return preempt_ended_ || preempt_failure_; });
        if (cut && !preempt_failure_) {
            preempt_failure_ = Error(fmt::format("the source ended postcopy, but not its postcopy-preempt connection within "
                                                 "{} ms (x-io-timeout)",
                                                 preempt_end_within_.count()));
        }
    }
    if (cut && cut_preempt_) cut_preempt_();
    preempt_thread_.join();
    std::lock_guard lock(preempt_mutex_);
    if (preempt_failure_) return *preempt_failure_;
    if (!preempt_ended_) return Error("the postcopy-preempt connection ended without its END");
    return {};
}

void PostcopyReceiver::close() {
    if (faults_) faults_->stop();
    uffd_.reset();
}

void PostcopyReceiver::detach() {
    std::lock_guard lock(write_mutex_);
    attached_ = false;
}

Status PostcopyReceiver::resume(ByteStream& stream, DestPostcopyChannel* channel, ByteStream* preempt,
                                std::function<void()> cut, std::chrono::milliseconds end_within) {
    // Nothing is placed while detached, so the set cannot change under the snapshot.
    for (const auto& m : encode_received_pages(blocks_, missing_->snapshot())) {
        if (auto s = stream.write(m); !s) return s;
    }
    if (auto s = stream.flush(); !s) return s;
    if (channel != nullptr)
        if (auto s = channel->begin(); !s) return s;
    {
        std::lock_guard lock(write_mutex_);
        stream_ = &stream;
        channel_ = channel;
        attached_ = true;
        use_preempt(preempt, std::move(cut), end_within);
    }
    {
        std::lock_guard lock(stats_mutex_);
        ++recoveries_;
    }
    return faults_->resend_pending();
}

PostcopyStats PostcopyReceiver::stats() const {
    PostcopyStats s;
    s.switched = true;
    if (missing_) {
        s.missing_pages = missing_->total();
        s.placed = missing_->total() - missing_->remaining();
    }
    if (faults_) faults_->fill(s);
    std::lock_guard lock(stats_mutex_);
    s.background_pages = background_;
    s.postcopy_bytes = bytes_;
    s.recoveries = recoveries_;
    s.preempt_pages = preempt_pages_;
    return s;
}

}  // namespace vmm::migration

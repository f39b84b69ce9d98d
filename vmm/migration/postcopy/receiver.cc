#include "vmm/migration/postcopy/receiver.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include "vmm/common/thread_name.h"
#include "vmm/migration/postcopy/recovery.h"
#include "vmm/migration/wire/page_sums.h"
#include "vmm/migration/wire/return_path.h"

namespace vmm::migration {

PostcopyReceiver::PostcopyReceiver(const memory::GuestMemory& mem, stream::ByteStream& stream, std::unique_ptr<DestPostcopyLink> link,
                                   std::vector<BlockInfo> blocks, std::vector<uint32_t> vcpu_tids, bool verify,
                                   std::chrono::milliseconds end_within)
    : mem_(mem), stream_(&stream), link_(std::move(link)), blocks_(std::move(blocks)), vcpu_tids_(std::move(vcpu_tids)),
      verify_(verify), end_within_(end_within) {}

PostcopyReceiver::~PostcopyReceiver() {
    (void)join_answers(true);
    if (faults_) faults_->stop();
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

// Under write_mutex_: detach() waits for a request in progress before the link goes. A page
// the link fetched itself while the fault thread waited is placed here, on that thread.
Status PostcopyReceiver::request(uint32_t block, uint64_t offset) {
    std::lock_guard lock(write_mutex_);
    if (!attached_) return Error("the link to the source is down");
    auto fetched = link_->fetch(block, offset);
    if (!fetched) return fetched.error();
    return *fetched ? place(**fetched) : Status{};
}

Status PostcopyReceiver::prepare(const std::vector<Record>& discards) {
    // The link first: a transport's channel lets go of what it registered of guest RAM for precopy.
    if (auto s = link_->begin(); !s) return s;
    std::vector<uint8_t*> hosts;
    auto uffd = userfault_over(mem_, hosts);
    if (!uffd) return uffd.error();
    uffd_ = std::move(*uffd);
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

// Pages placed from where they arrived (a stream's buffer, a channel's slot).
Status PostcopyReceiver::place(const PostcopyPages& p) {
    uint64_t length = uint64_t{p.pages} * kStreamPageSize;
    if (p.block >= blocks_.size() || p.offset % kStreamPageSize != 0 || p.offset > blocks_[p.block].size ||
        length > blocks_[p.block].size - p.offset) {
        return Error(fmt::format("the transport placed postcopy pages outside guest RAM (block {}, offset {:#x})", p.block,
                                 p.offset));
    }
    if (verify_ && !link_->authenticates_pages() && p.kind == PostcopyPages::Kind::data && p.sums.size() != p.pages) {
        return Error("postcopy: pages without their sums under verify-ram");
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
    return link_->release(p);
}

Status PostcopyReceiver::run() {
    if (link_->answers_apart()) {
        {
            std::lock_guard lock(answers_mutex_);
            answers_failure_.reset();
            answers_ended_ = false;
        }
        answers_thread_ = std::thread([this] { read_answers(); });
    }
    Status s = run_main();
    if (!s) (void)join_answers(true);
    return s;
}

Status PostcopyReceiver::run_main() {
    for (;;) {
        if (auto f = faults_->failure(); f) return f->context("sending a page request to the source");
        if (auto f = answers_failure(); f) return *f;
        auto p = link_->next(Lane::main);
        if (!p) return p.error();
        if (p->kind == PostcopyPages::Kind::end) {
            // The answers' lane's END went first: every answer on it is placed once it is read.
            if (auto s = join_answers(false); !s) return s;
            if (uint64_t left = missing_->remaining(); left != 0) {
                return Error(fmt::format("the source ended postcopy with {} pages still missing here", left));
            }
            std::lock_guard lock(write_mutex_);
            if (!attached_) return Error("the link to the source is down");
            return link_->done();
        }
        if (auto s = place(*p); !s) return s;
    }
}

// The answers' lane's thread: the answers to requests, placed as they come, until its END. The
// lane is silent while the guest touches nothing missing, so it waits as long as it takes;
// run() cuts it to end it early.
void PostcopyReceiver::read_answers() {
    name_this_thread("postcopy-preempt");
    Status s;
    for (;;) {
        auto p = link_->next(Lane::answers);
        if (!p) {
            s = p.error();
            break;
        }
        if (p->kind == PostcopyPages::Kind::end) {
            std::lock_guard lock(answers_mutex_);
            answers_ended_ = true;
            answers_cv_.notify_all();
            return;
        }
        if (s = place(*p); !s) break;
        std::lock_guard lock(stats_mutex_);
        preempt_pages_ += p->pages;
    }
    std::lock_guard lock(answers_mutex_);
    if (!answers_failure_) answers_failure_ = s.error().context("the postcopy-preempt connection");  // else: cut for it
    answers_cv_.notify_all();
}

std::optional<Error> PostcopyReceiver::answers_failure() {
    std::lock_guard lock(answers_mutex_);
    return answers_failure_;
}

Status PostcopyReceiver::join_answers(bool cut) {
    if (!answers_thread_.joinable()) return {};
    if (!cut) {  // the source sent its END there first; a source that did not is not waited for long
        std::unique_lock lock(answers_mutex_);
        cut = !answers_cv_.wait_for(lock, end_within_, [this] { return answers_ended_ || answers_failure_; });
        if (cut && !answers_failure_) {
            answers_failure_ = Error(fmt::format("the source ended postcopy, but not its postcopy-preempt connection within "
                                                 "{} ms (x-io-timeout)",
                                                 end_within_.count()));
        }
    }
    if (cut) link_->cut();
    answers_thread_.join();
    std::lock_guard lock(answers_mutex_);
    if (answers_failure_) return *answers_failure_;
    if (!answers_ended_) return Error("the postcopy-preempt connection ended without its END");
    return {};
}

void PostcopyReceiver::close() {
    if (faults_) faults_->stop();
    uffd_.reset();
}

void PostcopyReceiver::detach() {
    std::lock_guard lock(write_mutex_);
    attached_ = false;
    link_.reset();  // its connection goes next
}

Status PostcopyReceiver::resume(stream::ByteStream& stream, std::unique_ptr<DestPostcopyLink> link,
                                std::chrono::milliseconds end_within) {
    // Nothing is placed while detached, so the set cannot change under the snapshot.
    for (const auto& m : encode_received_pages(blocks_, missing_->snapshot())) {
        if (auto s = stream.write(m); !s) return s;
    }
    if (auto s = stream.flush(); !s) return s;
    if (auto s = link->begin(); !s) return s;
    {
        std::lock_guard lock(write_mutex_);
        stream_ = &stream;
        link_ = std::move(link);
        attached_ = true;
        end_within_ = end_within;
    }
    {
        std::lock_guard lock(stats_mutex_);
        ++recoveries_;
    }
    return faults_->resend_pending();
}

PostcopyStats PostcopyReceiver::stats() const {
    PostcopyStats s = fault_stats(missing_.get(), faults_.get());
    std::lock_guard lock(stats_mutex_);
    s.background_pages = background_;
    s.postcopy_bytes = bytes_;
    s.recoveries = recoveries_;
    s.preempt_pages = preempt_pages_;
    return s;
}

}  // namespace vmm::migration

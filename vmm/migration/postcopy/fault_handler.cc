#include "vmm/migration/postcopy/fault_handler.h"

#include <poll.h>
#include <sys/eventfd.h>

#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"

namespace vmm::migration {

namespace {
double us_between(FaultHandler::Clock::time_point a, FaultHandler::Clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
}
}  // namespace

FaultHandler::FaultHandler(Userfault& uffd, MissingPages& missing, std::vector<uint32_t> vcpu_tids, RequestFn request)
    : uffd_(uffd), missing_(missing), vcpu_tids_(std::move(vcpu_tids)), request_(std::move(request)),
      vcpus_(vcpu_tids_.size()) {}

FaultHandler::~FaultHandler() { stop(); }

Status FaultHandler::start() {
    stop_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!stop_fd_) return Error::from_errno("eventfd for the postcopy fault thread");
    thread_ = std::thread([this] { loop(); });
    return {};
}

void FaultHandler::stop() {
    if (!thread_.joinable()) return;
    uint64_t one = 1;
    (void)::write(stop_fd_.get(), &one, sizeof one);
    thread_.join();
}

void FaultHandler::loop() {
    name_this_thread("postcopy-fault");
    pollfd fds[2] = {{uffd_.fd(), POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}};
    for (;;) {
        int r = ::poll(fds, 2, -1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 || fds[1].revents != 0) return;
        auto faults = uffd_.read_faults();
        if (!faults) {
            log::error("postcopy: {}", faults.error().message());
            return;
        }
        auto now = Clock::now();
        for (const auto& f : *faults) handle(f, now);
    }
}

void FaultHandler::handle(const Userfault::Fault& f, Clock::time_point now) {
    auto page = missing_.locate(f.address);
    if (!page) return;  // only guest RAM is registered
    uint64_t k = key(page->block, page->page);
    auto* host = missing_.host(page->block, page->page);
    std::unique_lock lock(mutex_);
    block_vcpu(f.tid, k, now);
    if (!missing_.missing(*page)) {
        // Zero on the source (ZERO, or never populated), or placed since the fault was raised.
        lock.unlock();
        auto n = uffd_.zero(host, kStreamPageSize);
        if (n && *n == 0) (void)uffd_.wake(host, kStreamPageSize);
        lock.lock();
        if (n && *n != 0) ++zero_local_;
        unblock_waiting_on(k, Clock::now());
        return;
    }
    if (requested_.count(k) != 0) return;  // asked for already: the vCPU waits for that answer
    requested_.emplace(k, now);
    ++requests_;
    lock.unlock();
    if (auto s = request_(page->block, page->page * kStreamPageSize, kStreamPageSize); !s) {
        std::lock_guard again(mutex_);
        if (!failure_) failure_ = s.error();
    }
}

void FaultHandler::block_vcpu(uint32_t tid, uint64_t k, Clock::time_point now) {
    if (tid == 0) return;
    for (size_t i = 0; i < vcpu_tids_.size(); ++i) {
        if (vcpu_tids_[i] != tid || vcpus_[i].blocked) continue;
        vcpus_[i] = {true, k, now, vcpus_[i].total_ms};
        if (++blocked_now_ == vcpus_.size()) all_blocked_since_ = now;
    }
}

void FaultHandler::unblock_waiting_on(uint64_t k, Clock::time_point now) {
    for (auto& v : vcpus_) {
        if (!v.blocked || v.key != k) continue;
        v.blocked = false;
        v.total_ms += us_between(v.since, now) / 1000;
        if (blocked_now_-- == vcpus_.size()) all_blocked_ms_ += us_between(all_blocked_since_, now) / 1000;
    }
}

void FaultHandler::placed(uint32_t block, uint64_t first_page, uint64_t count) {
    auto now = Clock::now();
    std::lock_guard lock(mutex_);
    if (requested_.empty() && blocked_now_ == 0) return;
    for (uint64_t p = first_page; p < first_page + count; ++p) {
        uint64_t k = key(block, p);
        if (auto it = requested_.find(k); it != requested_.end()) {
            latency_.add(us_between(it->second, now));
            requested_.erase(it);
        }
        if (blocked_now_ != 0) unblock_waiting_on(k, now);
    }
}

void FaultHandler::fill(PostcopyStats& out) const {
    std::lock_guard lock(mutex_);
    out.requests = requests_;
    out.zero_local = zero_local_;
    out.fault_latency = latency_.summary();
    auto now = Clock::now();
    out.blocktime_ms = all_blocked_ms_;
    if (!vcpus_.empty() && blocked_now_ == vcpus_.size()) out.blocktime_ms += us_between(all_blocked_since_, now) / 1000;
    out.vcpu_blocktime_ms.clear();
    for (const auto& v : vcpus_) out.vcpu_blocktime_ms.push_back(v.total_ms + (v.blocked ? us_between(v.since, now) / 1000 : 0));
}

std::optional<Error> FaultHandler::failure() const {
    std::lock_guard lock(mutex_);
    return failure_;
}

Status FaultHandler::resend_pending() {
    std::vector<uint64_t> keys;
    {
        std::lock_guard lock(mutex_);
        failure_.reset();
        for (const auto& [k, t] : requested_) keys.push_back(k);
    }
    for (uint64_t k : keys) {
        auto block = static_cast<uint32_t>(k >> 48);
        uint64_t page = k & ((uint64_t{1} << 48) - 1);
        if (auto s = request_(block, page * kStreamPageSize, kStreamPageSize); !s) return s;
    }
    return {};
}

PostcopyStats fault_stats(const MissingPages* missing, const FaultHandler* faults) {
    PostcopyStats s;
    s.switched = true;
    if (missing != nullptr) {
        s.missing_pages = missing->total();
        s.placed = missing->total() - missing->remaining();
    }
    if (faults != nullptr) faults->fill(s);
    return s;
}

}  // namespace vmm::migration

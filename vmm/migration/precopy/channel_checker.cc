#include "vmm/migration/precopy/channel_checker.h"

#include <fmt/format.h>

#include "vmm/memory/ram_block.h"

namespace vmm::migration {

ChannelChecker::ChannelChecker(const memory::GuestMemory& mem, RamVerifier& verifier)
    : mem_(mem), verifier_(verifier), thread_([this] { run(); }) {}

ChannelChecker::~ChannelChecker() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

void ChannelChecker::on_checked(CheckedFn fn) {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [this] { return !busy_; });
    checked_ = std::move(fn);
}

Status ChannelChecker::add(uint32_t block, uint64_t offset, std::span<const uint64_t> sums, uint32_t round) {
    const auto& blocks = mem_.blocks();
    uint64_t length = sums.size() * memory::kPageSize;
    if (block >= blocks.size() || offset % memory::kPageSize != 0 || sums.empty() ||
        sums.size() > blocks[block]->pages() || offset > blocks[block]->size() - length) {
        return Error(fmt::format("verify-ram: the transport delivered sums for {} pages at {}:{:#x}, outside the RAM "
                                 "blocks",
                                 sums.size(), block, offset));
    }
    {
        std::lock_guard lock(mu_);
        jobs_.push_back({block, offset, {sums.begin(), sums.end()}, round});
        queued_bytes_ += length;
    }
    wake_.notify_one();
    return {};
}

void ChannelChecker::drain() { wait_idle(true); }

void ChannelChecker::finish_queued() { wait_idle(false); }

void ChannelChecker::wait_idle(bool round_end) {
    std::unique_lock lock(mu_);
    if (round_end) late_bytes_ += queued_bytes_;
    idle_.wait(lock, [this] { return jobs_.empty() && !busy_; });
}

uint64_t ChannelChecker::late_bytes() const {
    std::lock_guard lock(mu_);
    return late_bytes_;
}

void ChannelChecker::run() {
    std::unique_lock lock(mu_);
    for (;;) {
        wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (stop_) return;
        Job job = std::move(jobs_.front());
        jobs_.pop_front();
        busy_ = true;
        lock.unlock();
        check(job);
        lock.lock();
        busy_ = false;
        queued_bytes_ -= job.sums.size() * memory::kPageSize;
        idle_.notify_all();
    }
}

// The runs of pages between those that did not match are whole here as of the job's round.
// checked_ is read here unlocked: on_checked() changes it only while no job is being checked.
void ChannelChecker::check(const Job& job) {
    uint64_t length = job.sums.size() * memory::kPageSize;
    auto bad = verifier_.check(job.block, job.offset, {mem_.blocks()[job.block]->host() + job.offset, length}, job.sums);
    if (!checked_) return;
    uint64_t page = job.offset / memory::kPageSize, end = page + job.sums.size();
    for (uint64_t b : bad) {
        if (b > page) checked_(job.block, page, b - page, job.round);
        page = b + 1;
    }
    if (end > page) checked_(job.block, page, end - page, job.round);
}

}  // namespace vmm::migration

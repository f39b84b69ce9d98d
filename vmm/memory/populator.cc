#include "vmm/memory/populator.h"

#include <sys/mman.h>

namespace vmm::memory {

namespace {
constexpr size_t kMaxQueued = 2;

void populate(std::span<uint8_t> range) {
#ifdef MADV_POPULATE_WRITE
    // Advisory: a kernel without it (EINVAL) leaves the receiver to fault pages in as before.
    ::madvise(range.data(), range.size(), MADV_POPULATE_WRITE);
#else
    (void)range;
#endif
}
}  // namespace

Populator::Populator() : thread_([this] { run(); }) {}

Populator::~Populator() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    work_.notify_one();
    thread_.join();
}

void Populator::ahead(std::span<uint8_t> range) {
    if (range.empty()) return;
    {
        std::lock_guard lock(mutex_);
        if (queue_.size() >= kMaxQueued) return;
        queue_.push_back(range);
    }
    work_.notify_one();
}

void Populator::quiesce() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

uint64_t Populator::populated_bytes() const {
    std::lock_guard lock(mutex_);
    return populated_;
}

void Populator::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        work_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        auto range = queue_.front();
        queue_.pop_front();
        busy_ = true;
        lock.unlock();
        populate(range);
        lock.lock();
        busy_ = false;
        populated_ += range.size();
        if (queue_.empty()) idle_.notify_all();
    }
}

}  // namespace vmm::memory

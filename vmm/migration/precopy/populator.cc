#include "vmm/migration/precopy/populator.h"

#include <sys/mman.h>

#include <algorithm>

#include "vmm/common/thread_name.h"

namespace vmm::migration {

Populator::Populator() : thread_([this](std::stop_token stop) { loop(stop); }) {}

Populator::~Populator() {
    thread_.request_stop();  // wakes the wait below through its stop token
}

void Populator::expect(uint8_t* start, uint64_t length) {
    std::lock_guard lock(mutex_);
    begin_ = next_ = cursor_ = start;
    end_ = start + length;
    ++generation_;
    cv_.notify_all();
}

uint64_t Populator::ready(const uint8_t* at, uint64_t length) {
    std::lock_guard lock(mutex_);
    if (at < begin_ || at >= next_) return 0;
    return std::min<uint64_t>(length, static_cast<uint64_t>(next_ - at));
}

void Populator::received(uint8_t* upto) {
    std::lock_guard lock(mutex_);
    if (upto < begin_ || upto > end_) return;  // not in the current run
    cursor_ = std::max(cursor_, upto);
    next_ = std::max(next_, cursor_);  // below the cursor the receiver populated it anyway
    cv_.notify_all();
}

uint64_t Populator::populated_bytes() const {
    std::lock_guard lock(mutex_);
    return populated_;
}

void Populator::loop(std::stop_token stop) {
    name_this_thread("populate");
    std::unique_lock lock(mutex_);
    for (;;) {
        bool work = cv_.wait(lock, stop, [this] { return next_ < end_ && next_ < cursor_ + kAhead; });
        if (!work) return;  // stop requested
        // One slice, ending on a huge-page boundary so that each call populates whole THPs.
        uint8_t* from = next_;
        auto boundary = (reinterpret_cast<uintptr_t>(from) + kSlice) & ~(kSlice - 1);
        uint8_t* to = std::min(end_, reinterpret_cast<uint8_t*>(boundary));
        uint64_t generation = generation_;
        lock.unlock();
#ifdef MADV_POPULATE_WRITE
        int rc = ::madvise(from, static_cast<size_t>(to - from), MADV_POPULATE_WRITE);
#else
        int rc = -1;
#endif
        lock.lock();
        if (rc != 0) {  // the kernel cannot (older than 5.14): the receiver populates, as before
            end_ = next_;
            continue;
        }
        if (generation != generation_) continue;  // a new run began meanwhile
        populated_ += static_cast<uint64_t>(to - from);
        next_ = std::max(next_, to);
    }
}

}  // namespace vmm::migration

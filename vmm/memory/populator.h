// Populator: a helper thread that populates guest RAM ahead of an incoming migration's writes.
// A fresh anonymous page must be zeroed by the kernel before the received data is copied in;
// done on the receiving thread, that zeroing costs as much as the copy. The loader hands the
// range it expects next to this thread (MADV_POPULATE_WRITE), so zeroing and receiving run on
// two cores. Populating never changes what memory reads (a populated page is zero until
// written, and a page already written is left alone), so a guess that turns out wrong costs
// only the memory it populated.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <thread>

namespace vmm::memory {

class Populator {
public:
    Populator();
    ~Populator();  // stops and joins the thread
    Populator(const Populator&) = delete;
    Populator& operator=(const Populator&) = delete;

    // Queues `range` (page-aligned); dropped when two ranges are already waiting, since the
    // receiver is then ahead and would fault the pages in itself anyway.
    void ahead(std::span<uint8_t> range);
    // Returns when nothing is queued or being populated (before memory is given back with
    // MADV_DONTNEED, so the helper cannot populate it again behind the caller's back).
    void quiesce();
    uint64_t populated_bytes() const;

private:
    void run();

    mutable std::mutex mutex_;
    std::condition_variable work_;
    std::condition_variable idle_;
    std::deque<std::span<uint8_t>> queue_;
    bool busy_ = false;
    bool stop_ = false;
    uint64_t populated_ = 0;
    std::thread thread_;  // last: starts once everything above exists
};

}  // namespace vmm::memory

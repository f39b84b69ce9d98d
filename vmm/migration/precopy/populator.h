// Populator: on the destination, populates guest RAM ahead of the pages arriving into it.
//
// Fresh guest RAM must be populated (zeroed by the kernel) before data is copied in. Done by
// the receiving thread, that work stops the receive and the TCP window fills; the source then
// waits. When the source announces a run of pages it is about to send (a POPULATE record, see
// docs/migration-stream.md), a helper thread populates that run in 2 MiB slices, at most
// 32 MiB ahead of the receiver, while the receiver copies: the two overlap. The receiver never
// waits for the helper: it populates whatever the helper has not reached yet itself.
// Populating never changes contents, so the two may touch the same pages in any order.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace vmm::migration {

class Populator {
public:
    static constexpr uint64_t kSlice = 2 << 20;   // a huge page: what one THP fault populates
    static constexpr uint64_t kAhead = 32 << 20;  // how far ahead of the receiver at most

    Populator();
    ~Populator();  // stops and joins the helper
    Populator(const Populator&) = delete;
    Populator& operator=(const Populator&) = delete;

    // The source will send [start, start + length) next, in order (it replaces any run before).
    void expect(uint8_t* start, uint64_t length);
    // How many bytes from `at` (at most `length`) are populated already by the helper.
    uint64_t ready(const uint8_t* at, uint64_t length);
    // The receiver has written everything below `upto`: the helper may go further ahead.
    void received(uint8_t* upto);
    // Bytes the helper has populated (for tests and the numbers).
    uint64_t populated_bytes() const;

private:
    void loop(std::stop_token stop);

    mutable std::mutex mutex_;
    std::condition_variable_any cv_;
    uint8_t* begin_ = nullptr;   // the current run
    uint8_t* end_ = nullptr;
    uint8_t* next_ = nullptr;    // [begin_, next_) is populated
    uint8_t* cursor_ = nullptr;  // the receiver's position
    uint64_t generation_ = 0;    // changes with each run: a slice of an old run counts for nothing
    uint64_t populated_ = 0;
    std::jthread thread_;        // last: started once everything above exists
};

}  // namespace vmm::migration

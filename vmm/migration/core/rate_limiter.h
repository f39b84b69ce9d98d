// RateLimiter: keeps a sender at or under max-bandwidth. The budget refills continuously;
// a sender that is ahead of it sleeps (waking early on cancel). 0 means unlimited. A limiter
// that follows a live setting (live_settings.h) reads it before each decision: a new cap
// applies from the next send on.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "vmm/common/result.h"
#include "vmm/stream/cancel.h"

namespace vmm::migration {

class RateLimiter {
public:
    using Clock = std::chrono::steady_clock;
    // `sleep` waits for a duration or until cancelled (returns an error then); tests fake it.
    using SleepFn = std::function<Status(std::chrono::nanoseconds)>;

    // The rate now, read before each decision (LiveSettings::reader).
    using RateFn = std::function<uint64_t()>;

    RateLimiter(uint64_t bytes_per_second, SleepFn sleep, std::function<Clock::time_point()> now = Clock::now);
    RateLimiter(RateFn rate, SleepFn sleep, std::function<Clock::time_point()> now = Clock::now);

    void set_rate(uint64_t bytes_per_second);
    // The rate now (the live setting's, when it follows one); 0: unlimited.
    uint64_t rate() {
        follow();
        return rate_;
    }
    // Stops following the live setting and sends unpaced (a migration's downtime).
    void unpaced();
    // Accounts `bytes` as sent; sleeps as long as the sender is ahead of the rate.
    Status consume(uint64_t bytes);
    // For a sender that waits its turn before sending (and may do other work meanwhile):
    // accounts `bytes` without sleeping, and tells how long it is ahead of the rate (0: it may send).
    void account(uint64_t bytes);
    std::chrono::nanoseconds ahead();
    // Forgets what puts the sender more than `horizon` ahead of the rate: a burst that was not
    // held back (postcopy's readahead) delays what follows by at most that much.
    void forgive_beyond(std::chrono::nanoseconds horizon);

    // A SleepFn that polls the cancel token.
    static SleepFn cancellable_sleep(const stream::CancelToken& cancel);

private:
    Clock::time_point due() const;
    void follow();  // takes the live rate if it changed
    RateFn live_;   // or none: the rate is set_rate()'s
    uint64_t rate_;
    SleepFn sleep_;
    std::function<Clock::time_point()> now_;
    Clock::time_point start_;
    uint64_t sent_ = 0;
};

}  // namespace vmm::migration

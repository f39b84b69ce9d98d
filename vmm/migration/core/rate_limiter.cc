#include "vmm/migration/core/rate_limiter.h"

#include <poll.h>

#include <algorithm>

namespace vmm::migration {

RateLimiter::RateLimiter(uint64_t bytes_per_second, SleepFn sleep, std::function<Clock::time_point()> now)
    : rate_(bytes_per_second), sleep_(std::move(sleep)), now_(std::move(now)), start_(now_()) {}

RateLimiter::RateLimiter(RateFn rate, SleepFn sleep, std::function<Clock::time_point()> now)
    : live_(std::move(rate)), rate_(live_()), sleep_(std::move(sleep)), now_(std::move(now)), start_(now_()) {}

void RateLimiter::follow() {
    if (!live_) return;
    if (uint64_t r = live_(); r != rate_) set_rate(r);
}

void RateLimiter::unpaced() {
    live_ = nullptr;
    set_rate(0);
}

void RateLimiter::set_rate(uint64_t bytes_per_second) {
    rate_ = bytes_per_second;
    start_ = now_();
    sent_ = 0;
}

Status RateLimiter::consume(uint64_t bytes) {
    account(bytes);
    auto wait = ahead();
    return wait.count() > 0 ? sleep_(wait) : Status{};
}

void RateLimiter::account(uint64_t bytes) {
    follow();
    if (rate_ == 0) return;
    sent_ += bytes;
    // Far behind (e.g. a stall): do not let the sender burst to catch up for long.
    auto now = now_();
    if (now - due() > std::chrono::milliseconds(100)) {
        start_ = now;
        sent_ = 0;
    }
}

// Where the sender should be in time for what it has sent.
RateLimiter::Clock::time_point RateLimiter::due() const {
    return start_ + std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(sent_) * 1e9 / static_cast<double>(rate_)));
}

std::chrono::nanoseconds RateLimiter::ahead() {
    follow();
    if (rate_ == 0) return {};
    auto wait = due() - now_();
    return wait.count() > 0 ? std::chrono::duration_cast<std::chrono::nanoseconds>(wait) : std::chrono::nanoseconds{};
}

void RateLimiter::forgive_beyond(std::chrono::nanoseconds horizon) {
    auto over = ahead() - horizon;
    if (rate_ == 0 || over.count() <= 0) return;
    auto owed = static_cast<uint64_t>(static_cast<double>(over.count()) * static_cast<double>(rate_) / 1e9);
    sent_ -= std::min(sent_, owed);
}

RateLimiter::SleepFn RateLimiter::cancellable_sleep(const stream::CancelToken& cancel) {
    return [&cancel](std::chrono::nanoseconds d) -> Status {
        pollfd p{cancel.fd(), POLLIN, 0};
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
        ::poll(&p, 1, static_cast<int>(ms > 0 ? ms : 1));
        if (cancel.cancelled()) return Error("migration cancelled");
        return {};
    };
}

}  // namespace vmm::migration

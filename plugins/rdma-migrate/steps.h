// Where a connection's setup time goes (the setup_parts op, `info migrate`'s setup parts): each
// step a name (a static string) and its length. A StepClock marks steps one after another.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace rdma_migrate {

struct TimedStep {
    const char* name;
    uint64_t us;
};

class StepClock {
public:
    explicit StepClock(std::vector<TimedStep>& into) : into_(into) {}
    // Records the time since the last mark (or since the clock was made) as step `name`.
    void mark(const char* name) {
        auto now = std::chrono::steady_clock::now();
        into_.push_back({name, static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(now - last_).count())});
        last_ = now;
    }
    uint64_t ms_so_far() const {
        return static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - first_).count());
    }

private:
    std::vector<TimedStep>& into_;
    std::chrono::steady_clock::time_point first_ = std::chrono::steady_clock::now(), last_ = first_;
};

}  // namespace rdma_migrate

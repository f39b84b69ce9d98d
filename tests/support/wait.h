// The one way tests wait: on a condition, polled, with a deadline (never sleep-then-assert).
#pragma once

#include <chrono>
#include <functional>

namespace vmm::test {

// Polls `pred` every 10 ms until it holds or `timeout` passes; the last answer of `pred`.
bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds timeout);
// The same, with the deadline in whole seconds (the migration tests' unit).
inline bool eventually(const std::function<bool()>& pred, int seconds) {
    return wait_for(pred, std::chrono::seconds(seconds));
}

}  // namespace vmm::test

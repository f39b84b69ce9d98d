// x-deadline: a precopy that must end within a time the user set, and what to give up first when
// the prediction (core/eta.h) says it will not: nothing is waited for, the source acts as soon as
// the plan misses the deadline. Pure decisions, apart from any I/O, so they are tested alone.
//   cancel    end the migration now, the guest running on here, saying why (the default)
//   postcopy  switch to postcopy now (postcopy-ram on both sides): its end is the push's
//   downtime  raise downtime-limit, as little as meets the deadline, up to x-deadline-max-downtime
//   throttle  slow the vCPUs (auto-converge's steps at once) until the plan meets it
// A strategy that cannot meet it (the downtime ceiling too low, the throttle at its ceiling)
// cancels, saying so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "vmm/common/result.h"
#include "vmm/migration/core/eta.h"

namespace vmm::migration {

enum class DeadlineStrategy { cancel, postcopy, downtime, throttle };
std::optional<DeadlineStrategy> deadline_strategy_named(std::string_view name);
const char* to_string(DeadlineStrategy s);
// The strategy's row check (params.cc): one of the names, or one line saying which there are.
Status check_deadline_strategy(std::string_view name);

// x-deadline as typed: "off" (none), or a duration: "30s", "90000ms", "5m", "2h", "1d" (a bare
// number is seconds), more than 0 and at most ten years.
Result<uint64_t> parse_deadline_ms(std::string_view text);
Status check_deadline(std::string_view text);

struct DeadlineAction {
    enum class Kind { none, cancel, postcopy, downtime, throttle };
    Kind kind = Kind::none;
    uint64_t downtime_ms = 0;  // downtime: the limit that meets the deadline
    std::string why;           // cancel: the line the migration fails with
};

struct DeadlineFacts {
    uint64_t deadline_ms = 0;
    DeadlineStrategy strategy = DeadlineStrategy::cancel;
    uint64_t max_downtime_ms = 0;  // x-deadline-max-downtime
    double elapsed_ms = 0;         // since 'migrate'
    EtaFacts eta;                  // as measured now, at the downtime limit in force
    bool throttle_at_most = false; // the vCPUs already throttled as far as max-cpu-throttle allows
};

// None while the prediction meets the deadline (or there is none yet).
DeadlineAction deadline_action(const DeadlineFacts& f);

}  // namespace vmm::migration

#include "vmmd/domain/domain_def.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <vector>

namespace vmmd {

std::string format_uuid(const Uuid& u) {
    std::string s;
    for (size_t i = 0; i < u.size(); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
        s += fmt::format("{:02x}", u[i]);
    }
    return s;
}

std::optional<Uuid> parse_uuid(const std::string& text) {
    std::string hex;
    for (char c : text)
        if (c != '-') hex += c;
    if (hex.size() != 32 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) return std::nullopt;
    Uuid u{};
    for (size_t i = 0; i < u.size(); ++i) u[i] = static_cast<uint8_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
    return u;
}

std::string display_devices_named(const DomainDef& d) {
    std::string out;
    for (const auto& device : d.display_devices) out += (out.empty() ? "" : ", ") + device.label;
    return out;
}

std::optional<std::string> deadline_strategy_refusal(const std::optional<std::string>& strategy) {
    if (!strategy) return std::nullopt;
    // The rules of vmm's x-deadline-strategy (vmm/migration/precopy/deadline.h), checked here so a
    // domain's XML or a migration's parameters are refused when given, not when migrating.
    std::vector<std::string_view> seen;
    std::string_view text = *strategy;
    for (size_t at = 0; at <= text.size();) {
        size_t comma = std::min(text.find(',', at), text.size());
        std::string_view name = text.substr(at, comma - at);
        bool known = false;
        for (const char* k : {"cancel", "postcopy", "downtime", "throttle", "dirty-limit", "cheapest"}) known = known || name == k;
        if (!known) {
            return fmt::format("deadline strategy '{}': choose cancel, postcopy, downtime, throttle, dirty-limit or "
                               "cheapest, or several in the order to try them (e.g. downtime,throttle)",
                               text);
        }
        // cheapest is downtime and throttle, the cheaper first.
        auto named = [&seen](std::string_view n) { return std::find(seen.begin(), seen.end(), n) != seen.end(); };
        bool cheapest_twice = name == "cheapest" ? named("downtime") || named("throttle")
                                                 : (name == "downtime" || name == "throttle") && named("cheapest");
        if (named(name) || cheapest_twice) {
            return fmt::format("deadline strategy '{}': {} is named twice{}", text, name,
                               cheapest_twice ? " (cheapest is downtime and throttle, the cheaper first)" : "");
        }
        if (!seen.empty() && seen.back() == "cancel") {
            return fmt::format("deadline strategy '{}': cancel gives up the migration, so it can only come last", text);
        }
        seen.push_back(name);
        at = comma + 1;
    }
    return std::nullopt;
}

}  // namespace vmmd

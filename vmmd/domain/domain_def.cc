#include "vmmd/domain/domain_def.h"

#include <fmt/format.h>


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
    for (const char* known : {"cancel", "postcopy", "downtime", "throttle", "dirty-limit"})
        if (*strategy == known) return std::nullopt;
    return fmt::format("deadline strategy '{}': choose cancel, postcopy, downtime, throttle or dirty-limit", *strategy);
}

}  // namespace vmmd

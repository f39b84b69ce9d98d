#include "vmmd/domain/domain_def.h"

#include <fmt/format.h>

#include <regex>

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
    static const std::regex element(R"(^<([A-Za-z]+)(?:[^>]*?\stype=(["'])([^"']*)\2)?)");
    std::string out;
    for (const std::string& xml : d.display_devices) {
        std::smatch m;
        if (!std::regex_search(xml, m, element)) continue;
        if (!out.empty()) out += ", ";
        out += m[3].matched ? "<" + m[1].str() + " type='" + m[3].str() + "'>" : "<" + m[1].str() + ">";
    }
    return out;
}

}  // namespace vmmd

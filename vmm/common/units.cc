#include "vmm/common/units.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <limits>

namespace vmm {

Result<uint64_t> parse_uint(std::string_view text) {
    int base = 10;
    std::string_view digits = text;
    if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
        base = 16;
        digits.remove_prefix(2);
    }
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
        return Error(fmt::format("'{}' is not a non-negative integer", text));
    }
    return v;
}

static Result<uint64_t> suffix_multiplier(std::string_view suffix, std::string_view text) {
    std::string s;
    for (char c : suffix) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (s.empty() || s == "b") return uint64_t{1};
    if (s.size() == 3 && s.substr(1) == "ib") s.resize(1);
    if (s.size() == 2 && s[1] == 'b') s.resize(1);
    if (s == "k") return KiB;
    if (s == "m") return MiB;
    if (s == "g") return GiB;
    if (s == "t") return 1024 * GiB;
    return Error(fmt::format("'{}' is not a size: use a number with an optional k, m, g or t "
                             "suffix (e.g. 256M)",
                             text));
}

Result<uint64_t> parse_size(std::string_view text) {
    size_t i = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i == 0) {
        return Error(fmt::format("'{}' is not a size: use a number with an optional k, m, g or t "
                                 "suffix (e.g. 256M)",
                                 text));
    }
    auto number = parse_uint(text.substr(0, i));
    if (!number) return number.error();
    auto mult = suffix_multiplier(text.substr(i), text);
    if (!mult) return mult.error();
    if (*number > std::numeric_limits<uint64_t>::max() / *mult) {
        return Error(fmt::format("size '{}' is too large", text));
    }
    return *number * *mult;
}

std::string format_size(uint64_t bytes) {
    static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double v = static_cast<double>(bytes);
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    if (u == 0) return fmt::format("{} B", bytes);
    if (v == static_cast<double>(static_cast<uint64_t>(v))) return fmt::format("{} {}", v, kUnits[u]);
    return fmt::format("{:.1f} {}", v, kUnits[u]);
}

}  // namespace vmm

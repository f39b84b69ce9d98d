#include "tests/support/setup_parts.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace vmm::test {

namespace {

void skip_spaces(const std::string& t, size_t& at) {
    while (at < t.size() && t[at] == ' ') ++at;
}

// A list of parts from `at` up to a ')' or the end; false if the text is not such a list.
bool parse_list(const std::string& t, size_t& at, std::vector<ShownPart>& out) {
    for (;;) {
        skip_spaces(t, at);
        size_t space = t.find(' ', at);
        if (space == std::string::npos || space == at) return false;
        ShownPart p{t.substr(at, space - at), 0, {}};
        const char* start = t.c_str() + space + 1;
        char* end = nullptr;
        p.ms = std::strtod(start, &end);
        if (end == start) return false;
        at = static_cast<size_t>(end - t.c_str());
        skip_spaces(t, at);
        if (at < t.size() && t[at] == '(') {
            ++at;
            if (!parse_list(t, at, p.inner) || at >= t.size() || t[at] != ')') return false;
            ++at;
            skip_spaces(t, at);
        }
        out.push_back(std::move(p));
        if (at < t.size() && t[at] == ',') {
            ++at;
            continue;
        }
        return true;
    }
}

}  // namespace

std::vector<ShownPart> parse_setup_parts(const std::string& text) {
    std::string t = text;
    if (t.size() >= 3 && t.compare(t.size() - 3, 3, " ms") == 0) t.resize(t.size() - 3);
    std::vector<ShownPart> out;
    size_t at = 0;
    if (!parse_list(t, at, out) || at != t.size()) return {};
    return out;
}

std::vector<std::string> names_of(const std::vector<ShownPart>& parts) {
    std::vector<std::string> out;
    for (const auto& p : parts) out.push_back(p.name);
    return out;
}

double sum_ms(const std::vector<ShownPart>& parts) {
    double sum = 0;
    for (const auto& p : parts) sum += p.ms;
    return sum;
}

std::vector<ShownPart> expect_setup_parts(Vm& vm, const std::vector<std::string>& names) {
    std::string line = vm.migrate_field("setup parts");
    std::vector<ShownPart> parts = parse_setup_parts(line);
    EXPECT_EQ(names_of(parts), names) << "setup parts: " << line;
    double setup = std::strtod(vm.migrate_field("setup").c_str(), nullptr);
    // Each part is shown to 0.1 ms, the setup in whole ms (truncated).
    double slack = 0.05 * static_cast<double>(parts.size()) + 1.0;
    EXPECT_GE(sum_ms(parts) + slack, setup) << "the parts leave setup time unaccounted for: " << line;
    EXPECT_LE(sum_ms(parts), setup + slack) << "the parts add up to more than the setup: " << line;
    for (const auto& p : parts) {
        if (p.inner.empty()) continue;
        double inner = sum_ms(p.inner), inner_slack = 0.05 * static_cast<double>(p.inner.size()) + 0.05;
        // The transport's steps are timed apart from vmm's and inside it: they add up to no more.
        // How much they leave between them is not checked: on a loaded host the nested VM's one
        // emulated CPU is taken away for hundreds of ms at any point (a CI run: 437 ms of an
        // 816 ms connect), so a missing step is caught by the names the caller expects instead.
        EXPECT_LE(inner, p.ms + inner_slack) << p.name << "'s steps add up to more than it took: " << line;
    }
    return parts;
}

}  // namespace vmm::test

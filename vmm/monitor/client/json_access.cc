#include "vmm/monitor/client/json_access.h"

#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>

namespace vmm::monitor {

const Json* member(const Json& j, std::string_view key) {
    if (!j.is_object()) return nullptr;
    auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
}

const Json& child(const Json& j, std::string_view key) {
    static const Json null_value;
    const Json* m = member(j, key);
    return m == nullptr ? null_value : *m;
}

std::optional<std::string> as_string(const Json& v) {
    if (const auto* s = v.get_ptr<const Json::string_t*>()) return *s;
    return std::nullopt;
}

std::optional<uint64_t> as_uint(const Json& v) {
    if (const auto* u = v.get_ptr<const Json::number_unsigned_t*>()) return *u;
    if (const auto* i = v.get_ptr<const Json::number_integer_t*>(); i != nullptr && *i >= 0) return static_cast<uint64_t>(*i);
    return std::nullopt;
}

std::optional<std::string> string_member(const Json& j, std::string_view key) {
    const Json* m = member(j, key);
    return m == nullptr ? std::nullopt : as_string(*m);
}

std::optional<uint64_t> uint_member(const Json& j, std::string_view key) {
    const Json* m = member(j, key);
    return m == nullptr ? std::nullopt : as_uint(*m);
}

std::optional<int64_t> int_member(const Json& j, std::string_view key) {
    const Json* m = member(j, key);
    if (m == nullptr) return std::nullopt;
    if (const auto* i = m->get_ptr<const Json::number_integer_t*>()) return *i;
    if (const auto* u = m->get_ptr<const Json::number_unsigned_t*>(); u != nullptr && *u <= INT64_MAX) return static_cast<int64_t>(*u);
    return std::nullopt;
}

std::optional<double> number_member(const Json& j, std::string_view key) {
    const Json* m = member(j, key);
    if (m == nullptr) return std::nullopt;
    if (const auto* d = m->get_ptr<const Json::number_float_t*>()) return *d;
    if (const auto* i = m->get_ptr<const Json::number_integer_t*>()) return static_cast<double>(*i);
    if (const auto* u = m->get_ptr<const Json::number_unsigned_t*>()) return static_cast<double>(*u);
    return std::nullopt;
}

std::optional<bool> bool_member(const Json& j, std::string_view key) {
    const Json* m = member(j, key);
    if (m == nullptr) return std::nullopt;
    if (const auto* b = m->get_ptr<const Json::boolean_t*>()) return *b;
    return std::nullopt;
}

std::string str(const Json& j, std::string_view key, std::string_view fallback) {
    return string_member(j, key).value_or(std::string(fallback));
}
uint64_t u64(const Json& j, std::string_view key, uint64_t fallback) { return uint_member(j, key).value_or(fallback); }
double num(const Json& j, std::string_view key, double fallback) { return number_member(j, key).value_or(fallback); }
bool flag(const Json& j, std::string_view key, bool fallback) { return bool_member(j, key).value_or(fallback); }

std::string to_text(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Result<Json> parse_request(std::string_view text, size_t max_bytes) {
    if (text.size() > max_bytes) {
        return Error(fmt::format("request of {} bytes is over the limit of {} bytes", text.size(), max_bytes));
    }
    // The parser itself is iterative; copying, dumping and destroying are not, so depth is
    // refused here, while parsing: the callback sees each value's depth as it opens.
    // A key twice in one object is refused, as QEMU's parser does: otherwise the last would
    // silently win ({"execute": "query-status", "execute": "quit"} would quit).
    bool too_deep = false;
    std::optional<std::string> twice;
    std::vector<std::set<std::string>> keys;  // one per object open around the parser
    Json::parser_callback_t check = [&](int depth, Json::parse_event_t event, Json& parsed) {
        if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
            depth >= kMaxJsonDepth) {
            too_deep = true;
        }
        if (event == Json::parse_event_t::object_start) keys.emplace_back();
        if (event == Json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
        if (event == Json::parse_event_t::key && !keys.empty() && parsed.is_string() &&
            !keys.back().insert(parsed.get_ref<const std::string&>()).second) {
            twice = parsed.get_ref<const std::string&>();
        }
        return !too_deep && !twice;
    };
    Json j = Json::parse(text.begin(), text.end(), check, false);
    if (too_deep) return Error(fmt::format("request nests deeper than {} levels", kMaxJsonDepth));
    if (twice) return Error(fmt::format("the key '{}' appears twice in one object", *twice));
    if (j.is_discarded()) return Error("JSON parse error");
    return j;
}

}  // namespace vmm::monitor

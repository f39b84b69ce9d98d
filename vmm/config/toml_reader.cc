#include "vmm/config/toml_reader.h"

#include <fmt/format.h>

#include "vmm/common/units.h"

namespace vmm::config {

std::string_view type_name(const toml::node& node) {
    switch (node.type()) {
        case toml::node_type::none: return "nothing";
        case toml::node_type::table: return "a table";
        case toml::node_type::array: return "an array";
        case toml::node_type::string: return "a string";
        case toml::node_type::integer: return "an integer";
        case toml::node_type::floating_point: return "a float";
        case toml::node_type::boolean: return "a boolean";
        case toml::node_type::date: return "a date";
        case toml::node_type::time: return "a time";
        case toml::node_type::date_time: return "a date-time";
    }
    return "a value";
}

std::string TableReader::where(const toml::source_region& src) const {
    return fmt::format("{}:{}:{}", file_, src.begin.line, src.begin.column);
}

Error TableReader::error_at(const toml::node& node, std::string_view key, std::string_view what) const {
    std::string name = section_.empty() ? std::string(key) : fmt::format("{}.{}", section_, key);
    return Error(fmt::format("{}: {}: {}", where(node.source()), name, what));
}

Error TableReader::error_here(std::string_view what) const {
    return Error(fmt::format("{}: [{}]: {}", where(table_.source()), section_, what));
}

Status TableReader::only_keys(std::initializer_list<std::string_view> allowed) const {
    for (auto&& [key, value] : table_) {
        bool known = false;
        for (auto a : allowed) known = known || key.str() == a;
        if (known) continue;
        std::string list;
        for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        std::string name = section_.empty() ? std::string(key.str()) : fmt::format("{}.{}", section_, key.str());
        return Error(fmt::format("{}: unknown key '{}'; expected one of: {}", where(key.source()), name, list));
    }
    return {};
}

Result<std::optional<std::string>> TableReader::string(std::string_view key) const {
    const toml::node* n = table_.get(key);
    if (n == nullptr) return std::optional<std::string>{};
    if (!n->is_string()) return error_at(*n, key, fmt::format("expected a string, found {}", type_name(*n)));
    return std::optional<std::string>(n->as_string()->get());
}

Result<std::optional<int64_t>> TableReader::integer(std::string_view key, int64_t min, int64_t max) const {
    const toml::node* n = table_.get(key);
    if (n == nullptr) return std::optional<int64_t>{};
    if (!n->is_integer()) return error_at(*n, key, fmt::format("expected an integer, found {}", type_name(*n)));
    int64_t v = n->as_integer()->get();
    if (v < min || v > max) return error_at(*n, key, fmt::format("expected {} to {}, found {}", min, max, v));
    return std::optional<int64_t>(v);
}

Result<std::optional<bool>> TableReader::boolean(std::string_view key) const {
    const toml::node* n = table_.get(key);
    if (n == nullptr) return std::optional<bool>{};
    if (!n->is_boolean()) return error_at(*n, key, fmt::format("expected true or false, found {}", type_name(*n)));
    return std::optional<bool>(n->as_boolean()->get());
}

Result<std::optional<uint64_t>> TableReader::size(std::string_view key) const {
    const toml::node* n = table_.get(key);
    if (n == nullptr) return std::optional<uint64_t>{};
    if (n->is_integer()) {
        int64_t v = n->as_integer()->get();
        if (v < 0) return error_at(*n, key, "expected a non-negative size");
        return std::optional<uint64_t>(static_cast<uint64_t>(v));
    }
    if (!n->is_string()) {
        return error_at(*n, key, fmt::format("expected a size such as \"256M\" or 4096, found {}", type_name(*n)));
    }
    auto v = parse_size(n->as_string()->get());
    if (!v) return error_at(*n, key, v.error().message());
    return std::optional<uint64_t>(*v);
}

}  // namespace vmm::config

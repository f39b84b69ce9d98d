// Typed, position-aware reading of one TOML table: every error is
// "FILE:LINE:COLUMN: section.key: expected ..., found ...".
#pragma once

// Debian builds toml++ as a shared library with exceptions: parse errors are caught in
// parse_config() and never leave the config layer.
#include <toml++/toml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "vmm/common/result.h"

namespace vmm::config {

class TableReader {
public:
    TableReader(const toml::table& table, std::string section, std::string file)
        : table_(table), section_(std::move(section)), file_(std::move(file)) {}

    // Unknown keys are errors, so a typo never silently means "default".
    Status only_keys(std::initializer_list<std::string_view> allowed) const;

    Result<std::optional<std::string>> string(std::string_view key) const;
    Result<std::optional<int64_t>> integer(std::string_view key, int64_t min, int64_t max) const;
    Result<std::optional<bool>> boolean(std::string_view key) const;
    // A size: an integer (bytes) or a string such as "256M".
    Result<std::optional<uint64_t>> size(std::string_view key) const;
    const toml::node* node(std::string_view key) const { return table_.get(key); }

    Error error_at(const toml::node& node, std::string_view key, std::string_view what) const;
    Error error_here(std::string_view what) const;
    const std::string& file() const { return file_; }
    const std::string& section() const { return section_; }
    const toml::table& table() const { return table_; }
    // "file:line:column" of a place in the file.
    std::string where(const toml::source_region& src) const;

private:

    const toml::table& table_;
    std::string section_;
    std::string file_;
};

std::string_view type_name(const toml::node& node);

}  // namespace vmm::config

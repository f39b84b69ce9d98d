// Reading JSON that came from somewhere else (a monitor client, a QMP peer) without a single
// throwing accessor: nlohmann's get<>(), at() and value() throw on a wrong type, and its const
// operator[] is undefined on a missing key. Everything in vmm/monitor and vmmctl reads JSON
// through these; tests/monitor/no_throwing_json_test.sh checks that nothing else does.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "vmm/common/result.h"

namespace vmm::monitor {

using Json = nlohmann::json;

// Limits on one request (QEMU's QMP: 1024 levels of nesting); the line limit bounds memory.
inline constexpr size_t kMaxRequestBytes = 64 * 1024;
inline constexpr int kMaxJsonDepth = 1024;

// `key` of an object, or nullptr when `j` is not an object or has no such member.
const Json* member(const Json& j, std::string_view key);

// `key` of an object, or a null value when there is none (for chained reads that must not throw).
const Json& child(const Json& j, std::string_view key);

// The member as that type; nullopt when missing or of another type (never throws).
std::optional<std::string> string_member(const Json& j, std::string_view key);
std::optional<uint64_t> uint_member(const Json& j, std::string_view key);
std::optional<int64_t> int_member(const Json& j, std::string_view key);
std::optional<double> number_member(const Json& j, std::string_view key);
std::optional<bool> bool_member(const Json& j, std::string_view key);

// The same with a fallback, for rendering our own replies (a missing member prints the fallback).
std::string str(const Json& j, std::string_view key, std::string_view fallback = "");
uint64_t u64(const Json& j, std::string_view key, uint64_t fallback = 0);
double num(const Json& j, std::string_view key, double fallback = 0);
bool flag(const Json& j, std::string_view key, bool fallback = false);
// A value itself as a string / unsigned number, when it is one.
std::optional<std::string> as_string(const Json& v);
std::optional<uint64_t> as_uint(const Json& v);

// JSON as text; strings that are not UTF-8 (a guest's message, a peer's) are replaced, never
// thrown over.
std::string to_text(const Json& j);

// Parses one request: refuses text over kMaxRequestBytes and nesting deeper than kMaxJsonDepth
// before anything recursive touches it, and says where the JSON is broken.
Result<Json> parse_request(std::string_view text, size_t max_bytes = kMaxRequestBytes);

}  // namespace vmm::monitor

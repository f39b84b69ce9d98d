// libvirt's typed parameters on the wire (remote_typed_param: a name, then a value whose first
// word says its type): what migration and job statistics travel as. Lists are bounded by the
// procedure's own maximum (64 for migration parameters and job statistics).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "vmmd/rpc/message.h"
#include "vmmd/xdr/xdr.h"

namespace vmmd::rpc {

using TypedValue = std::variant<int32_t, uint32_t, int64_t, uint64_t, double, bool, std::string>;

struct TypedParam {
    std::string name;
    TypedValue value;
    bool operator==(const TypedParam&) const = default;
};

constexpr size_t kMaxTypedParams = 64;  // REMOTE_DOMAIN_MIGRATE_PARAM_LIST_MAX, REMOTE_DOMAIN_JOB_STATS_MAX
constexpr size_t kMaxFieldName = 80;    // VIR_TYPED_PARAM_FIELD_LENGTH

vmm::Result<std::vector<TypedParam>> decode_typed_params(xdr::Reader& r, size_t max = kMaxTypedParams);
void encode_typed_params(xdr::Writer& w, const std::vector<TypedParam>& params);

// Lookups that check the type: nullopt when absent; an error when present with another type
// (a client that sends "bandwidth" as a string is told so, not ignored). Integers of any width
// are accepted where they fit.
vmm::Result<std::optional<std::string>> string_param(const std::vector<TypedParam>& ps, std::string_view name);
vmm::Result<std::optional<uint64_t>> uint_param(const std::vector<TypedParam>& ps, std::string_view name);

}  // namespace vmmd::rpc

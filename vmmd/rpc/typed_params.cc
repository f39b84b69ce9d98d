#include "vmmd/rpc/typed_params.h"

#include <fmt/format.h>

namespace vmmd::rpc {

using vmm::Error;
using vmm::Result;

namespace {

enum Type : int32_t { kInt = 1, kUint = 2, kLlong = 3, kUllong = 4, kDouble = 5, kBoolean = 6, kString = 7 };

Result<TypedValue> decode_value(xdr::Reader& r, const std::string& name) {
    auto type = r.i32();
    if (!type) return type.error();
    switch (*type) {
        case kInt: { auto v = r.i32(); if (!v) return v.error(); return TypedValue(*v); }
        case kUint: { auto v = r.u32(); if (!v) return v.error(); return TypedValue(*v); }
        case kLlong: { auto v = r.i64(); if (!v) return v.error(); return TypedValue(*v); }
        case kUllong: { auto v = r.u64(); if (!v) return v.error(); return TypedValue(*v); }
        case kDouble: { auto v = r.f64(); if (!v) return v.error(); return TypedValue(*v); }
        case kBoolean: {
            auto v = r.i32();  // an int on the wire; libvirt sends 0 or 1
            if (!v) return v.error();
            return TypedValue(*v != 0);
        }
        case kString: { auto v = r.string(kMaxString); if (!v) return v.error(); return TypedValue(std::move(*v)); }
        default: break;
    }
    return Error(fmt::format("typed parameter '{}' has type {}, which libvirt does not define", name, *type));
}

}  // namespace

Result<std::vector<TypedParam>> decode_typed_params(xdr::Reader& r, size_t max) {
    auto n = r.count(max, 12);  // a name of at least a length word, a type word and a value word
    if (!n) return n.error();
    std::vector<TypedParam> out;
    out.reserve(*n);
    for (uint32_t i = 0; i < *n; ++i) {
        auto name = r.string(kMaxFieldName);
        if (!name) return name.error();
        auto value = decode_value(r, *name);
        if (!value) return value.error();
        out.push_back({std::move(*name), std::move(*value)});
    }
    return out;
}

void encode_typed_params(xdr::Writer& w, const std::vector<TypedParam>& params) {
    w.u32(static_cast<uint32_t>(params.size()));
    for (const TypedParam& p : params) {
        w.string(p.name);
        std::visit(
            [&w](const auto& v) {
                using T = std::decay_t<decltype(v)>;
                if constexpr (std::is_same_v<T, int32_t>) w.i32(kInt), w.i32(v);
                else if constexpr (std::is_same_v<T, uint32_t>) w.i32(kUint), w.u32(v);
                else if constexpr (std::is_same_v<T, int64_t>) w.i32(kLlong), w.i64(v);
                else if constexpr (std::is_same_v<T, uint64_t>) w.i32(kUllong), w.u64(v);
                else if constexpr (std::is_same_v<T, double>) w.i32(kDouble), w.f64(v);
                else if constexpr (std::is_same_v<T, bool>) w.i32(kBoolean), w.i32(v ? 1 : 0);
                else w.i32(kString), w.string(v);
            },
            p.value);
    }
}

Result<std::optional<std::string>> string_param(const std::vector<TypedParam>& ps, std::string_view name) {
    for (const TypedParam& p : ps) {
        if (p.name != name) continue;
        if (const auto* s = std::get_if<std::string>(&p.value)) return std::optional<std::string>(*s);
        return Error(fmt::format("typed parameter '{}' must be a string", name));
    }
    return std::optional<std::string>();
}

Result<std::optional<uint64_t>> uint_param(const std::vector<TypedParam>& ps, std::string_view name) {
    for (const TypedParam& p : ps) {
        if (p.name != name) continue;
        std::optional<uint64_t> v;
        if (const auto* a = std::get_if<int32_t>(&p.value); a && *a >= 0) v = static_cast<uint64_t>(*a);
        if (const auto* b = std::get_if<uint32_t>(&p.value)) v = *b;
        if (const auto* c = std::get_if<int64_t>(&p.value); c && *c >= 0) v = static_cast<uint64_t>(*c);
        if (const auto* d = std::get_if<uint64_t>(&p.value)) v = *d;
        if (!v) return Error(fmt::format("typed parameter '{}' must be a non-negative integer", name));
        return std::optional<uint64_t>(*v);
    }
    return std::optional<uint64_t>();
}

}  // namespace vmmd::rpc

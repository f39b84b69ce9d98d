#include "vmmd/xdr/xdr.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>

namespace vmmd::xdr {

namespace {
size_t padding(size_t n) { return (4 - n % 4) % 4; }
}  // namespace

void Writer::u32(uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out_.push_back(static_cast<uint8_t>(v >> shift));
}

void Writer::u64(uint64_t v) {
    u32(static_cast<uint32_t>(v >> 32));
    u32(static_cast<uint32_t>(v));
}

void Writer::f64(double v) { u64(std::bit_cast<uint64_t>(v)); }

void Writer::pad(size_t n) { out_.insert(out_.end(), padding(n), 0); }

void Writer::string(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
    pad(s.size());
}

void Writer::optional_string(const std::optional<std::string>& s) {
    boolean(s.has_value());
    if (s) string(*s);
}

void Writer::opaque(std::span<const uint8_t> data) {
    u32(static_cast<uint32_t>(data.size()));
    fixed_opaque(data);
}

void Writer::fixed_opaque(std::span<const uint8_t> data) {
    out_.insert(out_.end(), data.begin(), data.end());
    pad(data.size());
}

void Writer::patch_u32(size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.at(at + static_cast<size_t>(i)) = static_cast<uint8_t>(v >> (24 - 8 * i));
}

Result<std::span<const uint8_t>> Reader::take(size_t n) {
    if (n > left()) return Error(fmt::format("XDR: {} bytes wanted at offset {}, {} left", n, at_, left()));
    auto s = in_.subspan(at_, n);
    at_ += n;
    return s;
}

Status Reader::skip_padding(size_t n) {
    auto pad = take(padding(n));
    if (!pad) return pad.error();
    for (uint8_t b : *pad)
        if (b != 0) return Error(fmt::format("XDR: non-zero padding before offset {}", at_));
    return {};
}

Result<uint32_t> Reader::u32() {
    auto b = take(4);
    if (!b) return b.error();
    const uint8_t* p = b->data();
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

Result<int32_t> Reader::i32() {
    auto v = u32();
    if (!v) return v.error();
    return static_cast<int32_t>(*v);
}

Result<uint64_t> Reader::u64() {
    auto hi = u32();
    if (!hi) return hi.error();
    auto lo = u32();
    if (!lo) return lo.error();
    return (uint64_t{*hi} << 32) | *lo;
}

Result<int64_t> Reader::i64() {
    auto v = u64();
    if (!v) return v.error();
    return static_cast<int64_t>(*v);
}

Result<double> Reader::f64() {
    auto v = u64();
    if (!v) return v.error();
    return std::bit_cast<double>(*v);
}

Result<bool> Reader::boolean() {
    auto v = u32();
    if (!v) return v.error();
    return *v != 0;
}

Result<std::string> Reader::string(size_t max) {
    auto n = u32();
    if (!n) return n.error();
    if (*n > max) return Error(fmt::format("XDR: a string of {} bytes, more than the {} allowed", *n, max));
    auto b = take(*n);
    if (!b) return b.error();
    if (auto s = skip_padding(*n); !s) return s.error();
    return std::string(reinterpret_cast<const char*>(b->data()), b->size());
}

Result<std::optional<std::string>> Reader::optional_string(size_t max) {
    auto present = boolean();
    if (!present) return present.error();
    if (!*present) return std::optional<std::string>();
    auto s = string(max);
    if (!s) return s.error();
    return std::optional<std::string>(std::move(*s));
}

Result<std::vector<uint8_t>> Reader::opaque(size_t max) {
    auto n = u32();
    if (!n) return n.error();
    if (*n > max) return Error(fmt::format("XDR: opaque data of {} bytes, more than the {} allowed", *n, max));
    auto b = take(*n);
    if (!b) return b.error();
    if (auto s = skip_padding(*n); !s) return s.error();
    return std::vector<uint8_t>(b->begin(), b->end());
}

Status Reader::fixed_opaque(std::span<uint8_t> out) {
    auto b = take(out.size());
    if (!b) return b.error();
    std::memcpy(out.data(), b->data(), out.size());
    return skip_padding(out.size());
}

Result<uint32_t> Reader::count(size_t max, size_t min_element_bytes) {
    auto n = u32();
    if (!n) return n.error();
    if (*n > max) return Error(fmt::format("XDR: an array of {} elements, more than the {} allowed", *n, max));
    if (min_element_bytes > 0 && *n > left() / min_element_bytes) {
        return Error(fmt::format("XDR: an array of {} elements in {} bytes", *n, left()));
    }
    return *n;
}

Status Reader::finish() const {
    if (left() != 0) return Error(fmt::format("XDR: {} bytes left over after the arguments", left()));
    return {};
}

}  // namespace vmmd::xdr

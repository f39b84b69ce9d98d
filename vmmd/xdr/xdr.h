// XDR (RFC 4506), the encoding of libvirt's RPC: big-endian 4-byte units, strings and opaque
// data padded to a multiple of 4, optional values ("pointers") as a bool then the value.
// Pure: bytes in, values out. Every length and count read is checked against the caller's
// bound and against what is left before anything is allocated.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/result.h"

namespace vmmd::xdr {

using vmm::Error;
using vmm::Result;
using vmm::Status;

class Writer {
public:
    void u32(uint32_t v);
    void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
    void u64(uint64_t v);
    void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
    void f64(double v);
    void boolean(bool v) { u32(v ? 1 : 0); }
    void string(std::string_view s);                       // length, bytes, padding
    void optional_string(const std::optional<std::string>& s);  // present?, then the string
    void opaque(std::span<const uint8_t> data);            // variable length: length, bytes, padding
    void fixed_opaque(std::span<const uint8_t> data);      // fixed length: bytes, padding
    // Overwrites the 4 bytes at `at` (a length word written before its body).
    void patch_u32(size_t at, uint32_t v);
    size_t size() const { return out_.size(); }
    const std::vector<uint8_t>& bytes() const { return out_; }
    std::vector<uint8_t> take() { return std::move(out_); }

private:
    void pad(size_t n);
    std::vector<uint8_t> out_;
};

class Reader {
public:
    explicit Reader(std::span<const uint8_t> in) : in_(in) {}
    Result<uint32_t> u32();
    Result<int32_t> i32();
    Result<uint64_t> u64();
    Result<int64_t> i64();
    Result<double> f64();
    // 0 is false and any other word true, as libvirt's own XDR routines (xdr_bool) read it:
    // go-libvirt, for one, sends an optional string's "present" as a word other than 1.
    Result<bool> boolean();
    Result<std::string> string(size_t max);
    Result<std::optional<std::string>> optional_string(size_t max);
    Result<std::vector<uint8_t>> opaque(size_t max);
    Status fixed_opaque(std::span<uint8_t> out);
    // An array's element count, at most `max`, and plausible: each element takes at least
    // `min_element_bytes` of what is left.
    Result<uint32_t> count(size_t max, size_t min_element_bytes);
    // Whether everything was read: trailing bytes are an error (a call whose arguments do not
    // match the procedure).
    Status finish() const;
    size_t left() const { return in_.size() - at_; }

private:
    Result<std::span<const uint8_t>> take(size_t n);
    Status skip_padding(size_t n);
    std::span<const uint8_t> in_;
    size_t at_ = 0;
};

}  // namespace vmmd::xdr

// Explicit little-endian encode/decode of fixed-layout data (device state, later the migration
// stream). Writers append; readers never read past the end and say what was short.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "vmm/common/result.h"

namespace vmm {

class ByteWriter {
public:
    template <typename T>
        requires std::is_integral_v<T>
    void put(T v) {
        using U = std::make_unsigned_t<T>;
        auto u = static_cast<U>(v);
        for (size_t i = 0; i < sizeof(T); ++i) buf_.push_back(static_cast<uint8_t>(u >> (8 * i)));
    }
    void put_bytes(std::span<const uint8_t> b) { buf_.insert(buf_.end(), b.begin(), b.end()); }
    // u32 length, then the bytes.
    void put_string(std::string_view s) {
        put(static_cast<uint32_t>(s.size()));
        put_bytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
    }
    // u32 length, then the bytes.
    void put_blob(std::span<const uint8_t> b) {
        put(static_cast<uint32_t>(b.size()));
        put_bytes(b);
    }

    const std::vector<uint8_t>& bytes() const& { return buf_; }
    std::vector<uint8_t> take() && { return std::move(buf_); }

private:
    std::vector<uint8_t> buf_;
};

class ByteReader {
public:
    ByteReader(std::span<const uint8_t> data, std::string_view what) : data_(data), what_(what) {}

    template <typename T>
        requires std::is_integral_v<T>
    Status get(T& out) {
        if (auto s = need(sizeof(T)); !s) return s;
        std::make_unsigned_t<T> u = 0;
        for (size_t i = 0; i < sizeof(T); ++i)
            u |= static_cast<std::make_unsigned_t<T>>(data_[pos_ + i]) << (8 * i);
        pos_ += sizeof(T);
        out = static_cast<T>(u);
        return {};
    }
    Status get_bytes(std::span<uint8_t> out) {
        if (auto s = need(out.size()); !s) return s;
        if (!out.empty()) std::memcpy(out.data(), data_.data() + pos_, out.size());
        pos_ += out.size();
        return {};
    }
    // A u32-length-prefixed string of at most max_len bytes.
    Status get_string(std::string& out, size_t max_len);
    // A u32-length-prefixed blob of at most max_len bytes.
    Status get_blob(std::vector<uint8_t>& out, size_t max_len);

    size_t remaining() const { return data_.size() - pos_; }
    bool at_end() const { return pos_ == data_.size(); }
    // Fails unless every byte was consumed (trailing garbage is an error, not ignored).
    Status expect_end() const;

private:
    Status need(size_t n) const;

    std::span<const uint8_t> data_;
    size_t pos_ = 0;
    std::string_view what_;
};

}  // namespace vmm

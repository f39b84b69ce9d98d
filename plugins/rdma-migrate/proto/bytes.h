// Big-endian (network order) writer and reader for the protocol's encoders and decoders. The
// reader never reads past what it was given: callers check lengths first (every decoder does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rdma_migrate {

class Out {
public:
    void u32(uint32_t v) {
        for (int i = 3; i >= 0; --i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    }
    void u64(uint64_t v) {
        for (int i = 7; i >= 0; --i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    }
    void bytes(const void* p, size_t n) {
        auto* c = static_cast<const uint8_t*>(p);
        b.insert(b.end(), c, c + n);
    }
    void zeros(size_t n) { b.insert(b.end(), n, 0); }
    std::vector<uint8_t> b;
};

class In {
public:
    explicit In(std::span<const uint8_t> d) : d_(d) {}
    uint32_t u32() {
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) v = (v << 8) | d_[pos_++];
        return v;
    }
    uint64_t u64() {
        uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v = (v << 8) | d_[pos_++];
        return v;
    }
    std::span<const uint8_t> take(size_t n) {
        auto s = d_.subspan(pos_, n);
        pos_ += n;
        return s;
    }

private:
    std::span<const uint8_t> d_;
    size_t pos_ = 0;
};

}  // namespace rdma_migrate

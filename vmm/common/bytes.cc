#include "vmm/common/bytes.h"

#include <fmt/format.h>

namespace vmm {

Status ByteReader::need(size_t n) const {
    if (n > remaining()) {
        return Error(fmt::format("{}: truncated at byte {} (needs {} more bytes, {} left)", what_,
                                 pos_, n, remaining()));
    }
    return {};
}

Status ByteReader::get_string(std::string& out, size_t max_len) {
    std::vector<uint8_t> b;
    if (auto s = get_blob(b, max_len); !s) return s;
    out.assign(b.begin(), b.end());
    return {};
}

Status ByteReader::get_blob(std::vector<uint8_t>& out, size_t max_len) {
    uint32_t len = 0;
    if (auto s = get(len); !s) return s;
    if (len > max_len) {
        return Error(fmt::format("{}: length {} at byte {} exceeds the limit of {}", what_, len,
                                 pos_ - 4, max_len));
    }
    out.resize(len);
    return get_bytes(out);
}

Status ByteReader::expect_end() const {
    if (!at_end()) {
        return Error(fmt::format("{}: {} unexpected trailing bytes", what_, remaining()));
    }
    return {};
}

}  // namespace vmm

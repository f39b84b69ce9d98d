#include "vmm/migration/wire/page_sums.h"

#include <nettle/umac.h>
#include <xxhash.h>


#include "vmm/common/bytes.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

uint64_t page_checksum(const uint8_t* page) { return XXH3_64bits(page, kStreamPageSize); }

uint64_t keyed_sum(const PageSumKey& key, std::span<const uint8_t> data) {
    // Setting a UMAC key derives its hash keys (AES): done once per key and thread, not per page.
    thread_local std::optional<PageSumKey> cached;
    thread_local umac64_ctx ctx;
    if (!cached || *cached != key) {
        umac64_set_key(&ctx, key.data());
        cached = key;
    }
    umac64_set_nonce(&ctx, 8, key.data() + 16);
    umac64_update(&ctx, data.size(), data.data());
    std::array<uint8_t, 8> tag{};
    umac64_digest(&ctx, tag.size(), tag.data());
    uint64_t sum = 0;
    for (int i = 7; i >= 0; --i) sum = (sum << 8) | tag[static_cast<size_t>(i)];
    return sum;
}

uint64_t PageSummer::operator()(const uint8_t* page) const {
    if (!key_) return page_checksum(page);
    return keyed_sum(*key_, {page, kStreamPageSize});
}

void append_sums(std::vector<uint8_t>& out, std::span<const uint64_t> sums) {
    ByteWriter w;
    for (uint64_t s : sums) w.put(s);
    out.insert(out.end(), w.bytes().begin(), w.bytes().end());
}

void append_page_sums(std::vector<uint8_t>& out, std::span<const uint8_t> data, const PageSummer& summer) {
    std::vector<uint64_t> sums(data.size() / kStreamPageSize);
    for (size_t i = 0; i < sums.size(); ++i) sums[i] = summer(data.data() + i * kStreamPageSize);
    append_sums(out, sums);
}

Result<size_t> page_sums_size(uint64_t length) {
    if (length > kMaxPagesRecord || length % kStreamPageSize != 0) {
        return Error("migration stream: PAGES_SUMMED of a length that is not whole pages of one record");
    }
    return static_cast<size_t>(length / kStreamPageSize * sizeof(uint64_t));
}

Result<std::vector<uint64_t>> decode_sums(std::span<const uint8_t> bytes) {
    if (bytes.size() % sizeof(uint64_t) != 0) return Error("page sums: not a whole number of 8-byte sums");
    ByteReader r(bytes, "page sums");
    std::vector<uint64_t> sums(bytes.size() / sizeof(uint64_t));
    for (auto& v : sums)
        if (auto s = r.get(v); !s) return s.error();
    return sums;
}

}  // namespace vmm::migration

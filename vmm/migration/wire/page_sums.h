// verify-ram's page sums on the wire: the XXH3-64 of each 4 KiB page, as little-endian u64s
// after a PAGES_SUMMED or SUMS record (stream_format.h) and in multifd's records.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "vmm/common/result.h"

namespace vmm::migration {

// XXH3-64 of one page: what the source sends for each page of a record, what the destination
// recomputes. Per page, so that a mismatch owes exactly the pages that differ (a later round
// resends pages, not records).
uint64_t page_checksum(const uint8_t* page);
// An authenticated connection's sums (the RDMA transport with tls-creds) are MACs, so that
// nobody without the key, which both ends export from their TLS session, can make a page whose
// sum matches: UMAC-64 (RFC 4418) of the page, its 8 bytes as a little-endian u64. The key's
// first 16 bytes are UMAC's key, the next 8 its nonce; the rest is unused. One nonce serves
// every page of a connection because the sums never leave the TLS session: a forger sees no
// tag, so all it can do is find a collision of UMAC's hash under a key it does not know
// (RFC 4418: about 2^-60 a try for UMAC-64). UMAC rather than HMAC: it runs at XXH3's speed.
// Without a key, XXH3-64 (page_checksum).
using PageSumKey = std::array<uint8_t, 32>;
// UMAC-64 of `data` (any length) under `key` as above; what PageSummer computes for a page.
uint64_t keyed_sum(const PageSumKey& key, std::span<const uint8_t> data);
class PageSummer {
public:
    PageSummer() = default;
    explicit PageSummer(const PageSumKey& key) : key_(key) {}
    uint64_t operator()(const uint8_t* page) const;
    bool keyed() const { return key_.has_value(); }

private:
    std::optional<PageSumKey> key_;
};

// Appends `sums`, little-endian u64 each.
void append_sums(std::vector<uint8_t>& out, std::span<const uint64_t> sums);
// Appends the sums of every page of `data` (whole pages), made by `summer` (XXH3 by default).
void append_page_sums(std::vector<uint8_t>& out, std::span<const uint8_t> data, const PageSummer& summer = {});
// How many bytes of sums a PAGES_SUMMED record of `length` bytes carries (one u64 per page);
// refused unless `length` is whole pages of one record.
Result<size_t> page_sums_size(uint64_t length);
// The sums in `bytes` (a whole number of u64s).
Result<std::vector<uint64_t>> decode_sums(std::span<const uint8_t> bytes);

}  // namespace vmm::migration

// Authenticated postcopy over RDMA (kCapPostcopy with kCapTls; docs/rdma-protocol.md,
// "Authenticated postcopy"). The postcopy channel's SENDs and writes go outside the control
// channel's TLS session (one round trip a page, no record layer in the way), so each carries a
// UMAC-64 tag (RFC 4418) under keys both ends export from that session, label
// EXPORTER-vmm-rdma-postcopy, which nobody on the fabric can derive:
//   bytes 0..15: the key of the destination's messages (HELLO, REQUEST, CREDIT, DONE): each
//     message is followed by its tag (kPcSealedSize bytes in all);
//   bytes 16..31: the key of the source's writes: a write's trailer has kPcTagged and ends with
//     the tag of {the immediate's kind, the trailer before the tag, the pages}.
// The nonce is each direction's sequence number: a reliable connection delivers each direction
// in order, so both ends count alike, every nonce is used once under its key (UMAC's rule; the
// tags are seen on the wire), and a message or write that is forged, changed, replayed or
// reordered fails its tag. A recovery's connection has a TLS session, so keys, of its own.
#pragma once

#include <nettle/umac.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "postcopy_wire.h"

namespace rdma_migrate {

constexpr const char* kPcAuthLabel = "EXPORTER-vmm-rdma-postcopy";
constexpr size_t kPcAuthKeySize = 32;  // two UMAC keys of 16 bytes
constexpr size_t kPcSealedSize = kPcMessageSize + kPcTagSize;

// One direction's tags: UMAC-64 under a 16-byte key, the nonce its sequence number.
class PcTagger {
public:
    explicit PcTagger(std::span<const uint8_t, 16> key);
    // The tag of the next message (the concatenation of `parts`); the sequence moves on.
    uint64_t next(std::initializer_list<std::span<const uint8_t>> parts);
    uint64_t sequence() const { return sequence_; }

private:
    umac64_ctx ctx_;
    uint64_t sequence_ = 0;
};

// kCapPostcopyRead on an authenticated channel: a page the destination reads by RDMA READ
// comes with no write to carry a tag, so the source tags every page it exposes, once, into a
// table the destination reads beside the page: UMAC-64 under a key of its own (label
// EXPORTER-vmm-rdma-postcopy-read), the nonce the page's place {block u32, page number u64}.
// A page's bytes never change once exposed (the guest is paused for good), so each nonce is
// used once under the key; a page or tag forged on the fabric, or a page's tag moved to another
// place, does not match.
constexpr const char* kPcReadLabel = "EXPORTER-vmm-rdma-postcopy-read";
constexpr size_t kPcReadKeySize = 16;
class PcPageTags {
public:
    explicit PcPageTags(std::span<const uint8_t, 16> key);
    uint64_t tag(uint32_t block, uint64_t offset, std::span<const uint8_t> page);
    // The destination's check of `pages` pages read from `offset` of `block`, beside their
    // tags (`tags`: as read, network order). The error names the first page that fails.
    Status check(uint32_t block, uint64_t offset, std::span<const uint8_t> pages, std::span<const uint8_t> tags,
                 const std::string& block_name);

private:
    umac64_ctx ctx_;
};

// Both directions' taggers of one postcopy channel, from the exported key; `reads` with
// kCapPostcopyRead, from its own.
struct PcKeys {
    static Result<PcKeys> from(std::span<const uint8_t> exported);
    PcTagger messages;  // the destination's SENDs
    PcTagger writes;    // the source's writes (KEYS included: their tag follows the last region)
    std::optional<PcPageTags> reads;
};

// A message and its tag (kPcSealedSize bytes); the tagger moves on.
std::vector<uint8_t> seal_pc_message(const PcMessage& m, PcTagger& tagger);
// Checks the length and the tag (the tagger's next), then decodes as decode_pc_message.
Result<PcMessage> open_pc_message(std::span<const uint8_t> bytes, PcTagger& tagger);

// A write's tag: over its kind, its trailer's encoding without the tag and its pages.
uint64_t pc_write_tag(PcTagger& tagger, PcKind kind, std::span<const uint8_t> trailer, std::span<const uint8_t> pages);
// KEYS (and PULL, `kind`) on an authenticated channel: the regions' (runs') bytes, then the tag
// of {kind, those bytes} under the writes' key (in the writes' order). seal appends it; open
// checks it (`bytes`: the regions' and then the tag's) and names the write that fails.
void seal_pc_keys(std::vector<uint8_t>& regions, PcTagger& tagger, PcKind kind = PcKind::keys);
Status open_pc_keys(std::span<const uint8_t> bytes, size_t regions_size, PcTagger& tagger, PcKind kind = PcKind::keys);
// The destination's check of a tagged write: `t` as decoded from `trailer` (its bytes as they
// arrived, the tag's included), `pages` the pages as copied out of the slot. The error names the
// range the trailer gives.
Status check_pc_write(PcTagger& tagger, PcKind kind, const PcTrailer& t, std::span<const uint8_t> trailer,
                      std::span<const uint8_t> pages, const std::string& block_name);

}  // namespace rdma_migrate

#include "postcopy_auth.h"

#include <fmt/format.h>

#include <array>

#include "bytes.h"

namespace rdma_migrate {

PcTagger::PcTagger(std::span<const uint8_t, 16> key) { umac64_set_key(&ctx_, key.data()); }

namespace {
// The tag UMAC-64 gives `ctx` for what was fed to it since its nonce, as a number.
uint64_t digest64(umac64_ctx& ctx) {
    std::array<uint8_t, 8> tag{};
    umac64_digest(&ctx, tag.size(), tag.data());
    return In(tag).u64();
}
}  // namespace

uint64_t PcTagger::next(std::initializer_list<std::span<const uint8_t>> parts) {
    Out nonce;
    nonce.u64(sequence_++);
    umac64_set_nonce(&ctx_, nonce.b.size(), nonce.b.data());
    for (auto p : parts) umac64_update(&ctx_, p.size(), p.data());
    return digest64(ctx_);
}

PcPageTags::PcPageTags(std::span<const uint8_t, 16> key) { umac64_set_key(&ctx_, key.data()); }

uint64_t PcPageTags::tag(uint32_t block, uint64_t offset, std::span<const uint8_t> page) {
    Out nonce;  // the page's place: {block u32, page number u64}
    nonce.u32(block);
    nonce.u64(offset / kPcPage);
    umac64_set_nonce(&ctx_, nonce.b.size(), nonce.b.data());
    umac64_update(&ctx_, page.size(), page.data());
    return digest64(ctx_);
}

Status PcPageTags::check(uint32_t block, uint64_t offset, std::span<const uint8_t> pages, std::span<const uint8_t> tags,
                         const std::string& block_name) {
    uint64_t count = pages.size() / kPcPage;
    if (pages.size() % kPcPage != 0 || tags.size() != count * kPcTagSize) {
        return Error(fmt::format("internal: {} bytes of pages checked against {} bytes of tags", pages.size(), tags.size()));
    }
    In told(tags);
    for (uint64_t i = 0; i < count; ++i) {
        uint64_t at = offset + i * kPcPage;
        if (tag(block, at, pages.subspan(i * kPcPage, kPcPage)) == told.u64()) continue;
        return Error(fmt::format("RDMA postcopy: the page read by RDMA READ from RAM block '{}' offset {:#x} failed "
                                 "authentication (MAC mismatch): not what the source exposed, or its tag was not; "
                                 "nothing of the {} page(s) read was placed",
                                 block_name, at, count));
    }
    return {};
}

Result<PcKeys> PcKeys::from(std::span<const uint8_t> exported) {
    if (exported.size() != kPcAuthKeySize) {
        return Error(fmt::format("internal: a postcopy key of {} bytes, where {} are needed", exported.size(), kPcAuthKeySize));
    }
    return PcKeys{PcTagger(exported.subspan<0, 16>()), PcTagger(exported.subspan<16, 16>()), std::nullopt};
}

std::vector<uint8_t> seal_pc_message(const PcMessage& m, PcTagger& tagger) {
    auto bytes = encode_pc_message(m);
    encode_pc_tag(bytes, tagger.next({bytes}));
    return bytes;
}

Result<PcMessage> open_pc_message(std::span<const uint8_t> bytes, PcTagger& tagger) {
    if (bytes.size() != kPcSealedSize) {
        return Error(fmt::format("RDMA postcopy channel: a message of {} bytes, where an authenticated one has {}",
                                 bytes.size(), kPcSealedSize));
    }
    uint64_t number = tagger.sequence();
    auto message = bytes.first(kPcMessageSize);
    uint64_t expected = tagger.next({message});
    uint64_t tag = 0;
    for (uint8_t b : bytes.subspan(kPcMessageSize)) tag = (tag << 8) | b;
    if (tag != expected) {
        return Error(fmt::format("RDMA postcopy: the destination's message {} failed authentication (MAC mismatch): "
                                 "sent, changed or replayed by someone other than the destination",
                                 number));
    }
    return decode_pc_message(message);
}

uint64_t pc_write_tag(PcTagger& tagger, PcKind kind, std::span<const uint8_t> trailer, std::span<const uint8_t> pages) {
    const uint8_t k = static_cast<uint8_t>(kind);
    return tagger.next({std::span<const uint8_t>(&k, 1), trailer, pages});
}

void seal_pc_keys(std::vector<uint8_t>& regions, PcTagger& tagger, PcKind kind) {
    encode_pc_tag(regions, pc_write_tag(tagger, kind, regions, {}));
}

Status open_pc_keys(std::span<const uint8_t> bytes, size_t regions_size, PcTagger& tagger, PcKind kind) {
    uint64_t number = tagger.sequence();
    const char* what = kind == PcKind::pull ? "PULL" : "KEYS";
    if (bytes.size() < regions_size + kPcTagSize) return Error(fmt::format("internal: {} checked without room for its tag", what));
    uint64_t expected = pc_write_tag(tagger, kind, bytes.first(regions_size), {});
    if (In(bytes.subspan(regions_size, kPcTagSize)).u64() == expected) return {};
    return Error(fmt::format("RDMA postcopy: write {} ({}) failed authentication (MAC mismatch): written or changed by "
                             "someone other than the source; {}",
                             number, what, kind == PcKind::pull ? "nothing of it is read" : "no region of it is read"));
}

Status check_pc_write(PcTagger& tagger, PcKind kind, const PcTrailer& t, std::span<const uint8_t> trailer,
                      std::span<const uint8_t> pages, const std::string& block_name) {
    uint64_t number = tagger.sequence();
    if ((t.flags & kPcTagged) == 0) {
        return Error(fmt::format("RDMA postcopy: write {} (RAM block '{}' offset {:#x}) carries no tag on an "
                                 "authenticated channel: not the source's",
                                 number, block_name, t.offset));
    }
    // The bytes that arrived, not a re-encoding: decode checked that they hold the tag.
    if (pc_write_tag(tagger, kind, trailer.first(pc_trailer_untagged_size(t)), pages) == t.tag) return {};
    return Error(fmt::format("RDMA postcopy: write {} for RAM block '{}' offset {:#x} (+{:#x}) failed authentication "
                             "(MAC mismatch): written or changed by someone other than the source; nothing of it was placed",
                             number, block_name, t.offset, uint64_t{t.pages} * kPcPage));
}

}  // namespace rdma_migrate

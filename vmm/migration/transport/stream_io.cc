#include "vmm/migration/transport/stream_io.h"

#include "vmm/migration/wire/page_sums.h"

namespace vmm::migration {

namespace {

// The next `n` bytes of the stream (n is bounded by the decoders: at most kMaxHeaderBody).
Result<std::vector<uint8_t>> take(stream::ByteStream& in, size_t n) {
    std::vector<uint8_t> bytes(n);
    if (auto s = in.read_exact(bytes); !s) return s.error();
    return bytes;
}

// A type byte and the fields its format says follow it (`body_size`: record or reply).
struct Typed {
    uint8_t type = 0;
    std::vector<uint8_t> body;
};
Result<Typed> take_typed(stream::ByteStream& in, Result<size_t> (*body_size)(uint8_t)) {
    Typed t;
    if (auto s = in.read_exact({&t.type, 1}); !s) return s.error();
    auto size = body_size(t.type);
    if (!size) return size.error();
    auto body = take(in, *size);
    if (!body) return body.error();
    t.body = std::move(*body);
    return t;
}

}  // namespace

Status read_magic(stream::ByteStream& in) {
    auto magic = take(in, kMagic.size());
    if (!magic) return magic.error();
    return decode_magic(*magic);
}

Result<StreamHeader> read_header_after_magic(stream::ByteStream& in) {
    auto prefix = take(in, kHeaderPrefix);
    if (!prefix) return prefix.error();
    auto length = decode_header_prefix(*prefix);
    if (!length) return length.error();
    auto body = take(in, *length);
    if (!body) return body.error();
    return decode_header_body(*body);
}

Result<StreamHeader> read_header(stream::ByteStream& in) {
    if (auto s = read_magic(in); !s) return s.error();
    return read_header_after_magic(in);
}

Result<Record> read_record(stream::ByteStream& in, const std::vector<BlockInfo>& blocks, uint32_t page_size) {
    auto t = take_typed(in, record_body_size);
    if (!t) return t.error();
    return decode_record(t->type, t->body, blocks, page_size);
}

Result<Reply> read_reply(stream::ByteStream& in) {
    auto t = take_typed(in, reply_body_size);
    if (!t) return t.error();
    auto head = decode_reply(t->type, t->body);
    if (!head) return head.error();
    auto reason = take(in, head->reason_length);
    if (!reason) return reason.error();
    head->reply.reason.assign(reason->begin(), reason->end());
    return std::move(head->reply);
}

Result<ReturnRead> read_return(stream::ByteStream& in, const std::vector<BlockInfo>& blocks, uint32_t page_size) {
    auto t = take_typed(in, return_body_size);
    if (!t) return t.error();
    auto m = decode_return(t->type, t->body, blocks, page_size);
    if (!m) return m.error();
    ReturnRead out{*m, {}, {}};
    if (m->type == ReturnType::received_rounds) {
        auto bytes = take(in, rounds_bytes(*m));
        if (!bytes) return bytes.error();
        auto rounds = decode_rounds(*m, *bytes);
        if (!rounds) return rounds.error();
        out.rounds = std::move(*rounds);
        return out;
    }
    if (m->type != ReturnType::received_bitmap) return out;
    auto bytes = take(in, bitmap_bytes(*m));
    if (!bytes) return bytes.error();
    auto words = decode_bitmap_words(*m, *bytes);
    if (!words) return words.error();
    out.words = std::move(*words);
    return out;
}

Status read_page_sums(stream::ByteStream& in, uint64_t length, std::vector<uint64_t>& sums) {
    auto size = page_sums_size(length);
    if (!size) return size.error();
    auto bytes = take(in, *size);
    if (!bytes) return bytes.error();
    auto decoded = decode_sums(*bytes);
    if (!decoded) return decoded.error();
    sums = std::move(*decoded);
    return {};
}

}  // namespace vmm::migration

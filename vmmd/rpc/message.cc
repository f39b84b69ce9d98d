#include "vmmd/rpc/message.h"

#include <fmt/format.h>

namespace vmmd::rpc {

Result<size_t> decode_length(std::span<const uint8_t, kLengthSize> word) {
    xdr::Reader r(word);
    auto total = r.u32();
    if (!total) return total.error();
    // The length counts itself.
    if (*total < kLengthSize + kHeaderSize) return Error(fmt::format("RPC: a message of {} bytes is shorter than its header", *total));
    if (*total - kLengthSize > kMaxMessage) {
        return Error(fmt::format("RPC: a message of {} bytes, more than libvirt's maximum of {}", *total, kMaxMessage));
    }
    return *total - kLengthSize;
}

Result<Message> decode_message(std::span<const uint8_t> bytes) {
    if (bytes.size() < kHeaderSize) return Error("RPC: a message shorter than its header");
    xdr::Reader r(bytes.first(kHeaderSize));
    Message m;
    auto program = r.u32(), version = r.u32();
    auto procedure = r.i32();
    auto type = r.u32(), serial = r.u32(), status = r.u32();
    if (!program || !version || !procedure || !type || !serial || !status) return Error("RPC: a message shorter than its header");
    if (*type > static_cast<uint32_t>(Type::reply_with_fds)) return Error(fmt::format("RPC: message type {}", *type));
    if (*status > static_cast<uint32_t>(ReplyStatus::more)) return Error(fmt::format("RPC: message status {}", *status));
    m.header = {*program, *version, *procedure, static_cast<Type>(*type), *serial, static_cast<ReplyStatus>(*status)};
    m.payload.assign(bytes.begin() + kHeaderSize, bytes.end());
    return m;
}

std::vector<uint8_t> encode_message(const Header& h, std::span<const uint8_t> payload) {
    xdr::Writer w;
    w.u32(static_cast<uint32_t>(kLengthSize + kHeaderSize + payload.size()));
    w.u32(h.program);
    w.u32(h.version);
    w.i32(h.procedure);
    w.u32(static_cast<uint32_t>(h.type));
    w.u32(h.serial);
    w.u32(static_cast<uint32_t>(h.status));
    std::vector<uint8_t> out = w.take();
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
}

std::vector<uint8_t> encode_error(const RemoteError& e) {
    xdr::Writer w;
    w.i32(e.code);
    w.i32(e.domain);
    w.optional_string(e.message);
    w.i32(e.level);
    w.boolean(false);  // dom
    w.optional_string(e.str1);
    w.optional_string(std::nullopt);  // str2
    w.optional_string(std::nullopt);  // str3
    w.i32(0);          // int1
    w.i32(0);          // int2
    w.boolean(false);  // net
    return w.take();
}

namespace {
// remote_nonnull_domain / remote_nonnull_network, when present: skipped.
Status skip_optional_object(xdr::Reader& r, bool has_id) {
    auto present = r.boolean();
    if (!present) return present.error();
    if (!*present) return {};
    if (auto name = r.string(kMaxString); !name) return name.error();
    uint8_t uuid[16];
    if (auto s = r.fixed_opaque(uuid); !s) return s;
    if (has_id)
        if (auto id = r.i32(); !id) return id.error();
    return {};
}
}  // namespace

Result<RemoteError> decode_error(std::span<const uint8_t> payload) {
    xdr::Reader r(payload);
    RemoteError e;
    auto code = r.i32(), domain = r.i32();
    if (!code || !domain) return Error("RPC: an error reply shorter than its codes");
    auto message = r.optional_string(kMaxString);
    if (!message) return message.error();
    auto level = r.i32();
    if (!level) return level.error();
    if (auto s = skip_optional_object(r, true); !s) return s.error();
    auto str1 = r.optional_string(kMaxString);
    if (!str1) return str1.error();
    for (int i = 0; i < 2; ++i)
        if (auto s = r.optional_string(kMaxString); !s) return s.error();
    for (int i = 0; i < 2; ++i)
        if (auto n = r.i32(); !n) return n.error();
    if (auto s = skip_optional_object(r, false); !s) return s.error();
    if (auto s = r.finish(); !s) return s.error();
    e.code = *code;
    e.domain = *domain;
    e.message = message->value_or("");
    e.level = *level;
    e.str1 = std::move(*str1);
    return e;
}

}  // namespace vmmd::rpc

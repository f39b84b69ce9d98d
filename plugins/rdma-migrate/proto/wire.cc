#include "wire.h"

#include <fmt/format.h>

#include <cstring>

#include "bytes.h"

namespace rdma_migrate {

namespace {

// Entries whose count the header's repeat gives (length must be exactly repeat of them).
size_t repeated_entry(Command c) {
    switch (c) {
        case Command::register_request:
        case Command::unregister_request: return kRegisterEntrySize;
        case Command::compress: return kCompressSize;
        default: return 0;
    }
}

// Entries whose count the length gives: QEMU sends RAM BLOCKS RESULT with repeat 1 and a
// REGISTER RESULT with the request's repeat whatever it carries.
size_t counted_entry(Command c) {
    switch (c) {
        case Command::ram_blocks_result: return kBlockDescSize;
        case Command::register_result: return kRegisterResultSize;
        default: return 0;
    }
}

bool carries_nothing(Command c) {
    return c == Command::ready || c == Command::ram_blocks_request || c == Command::register_finished ||
           c == Command::unregister_finished;
}

Status expect(const Message& m, Command c) {
    if (m.header.type != c) {
        return Error(fmt::format("RDMA control channel: expected {}, received {}", to_string(c), to_string(m.header.type)));
    }
    return {};
}

}  // namespace

const char* to_string(Command c) {
    switch (c) {
        case Command::none: return "NONE";
        case Command::error: return "ERROR";
        case Command::ready: return "READY";
        case Command::qemu_file: return "QEMU FILE";
        case Command::ram_blocks_request: return "RAM BLOCKS REQUEST";
        case Command::ram_blocks_result: return "RAM BLOCKS RESULT";
        case Command::compress: return "COMPRESS";
        case Command::register_request: return "REGISTER REQUEST";
        case Command::register_result: return "REGISTER RESULT";
        case Command::register_finished: return "REGISTER FINISHED";
        case Command::unregister_request: return "UNREGISTER REQUEST";
        case Command::unregister_finished: return "UNREGISTER FINISHED";
        case Command::sums: return "SUMS";
        case Command::tls: return "TLS";
    }
    return "UNKNOWN";
}

std::vector<uint8_t> encode_private_data(const PrivateData& p) {
    Out o;
    o.u32(p.version);
    o.u32(p.flags);
    if ((p.flags & kExtensionCaps) == 0) return std::move(o.b);  // the base protocol's 8 bytes
    bool channels = (p.flags & kCapChannels) != 0;
    o.u32(channels ? p.channel : 0);
    o.u32(channels ? p.channels : 0);
    o.u64(channels ? p.session : 0);
    o.u32((p.flags & kCapChunkSize) != 0 ? p.chunk_shift : 0);
    o.u32(0);
    return std::move(o.b);
}

Result<PrivateData> decode_private_data(std::span<const uint8_t> bytes) {
    if (bytes.size() < kBasePrivateDataSize) {
        return Error(fmt::format("RDMA connection private data is {} bytes; the protocol needs at least 8 "
                                 "(version, flags): is the peer a migration endpoint?",
                                 bytes.size()));
    }
    In in(bytes);
    PrivateData p;
    p.version = in.u32();
    p.flags = in.u32();
    if (p.version != kProtocolVersion) {
        return Error(fmt::format("the peer speaks RDMA migration protocol version {}, this vmm version {}: use the "
                                 "same vmm release on both sides",
                                 p.version, kProtocolVersion));
    }
    if ((p.flags & kExtensionCaps) == 0) return p;  // a base-protocol peer: whatever follows is padding
    if (bytes.size() < kPrivateDataSize) {
        return Error(fmt::format("RDMA private data announces extensions {:#x} but is only {} bytes", p.flags & kExtensionCaps,
                                 bytes.size()));
    }
    uint32_t channel = in.u32(), channels = in.u32();
    uint64_t session = in.u64();
    uint32_t chunk_shift = in.u32();
    if ((p.flags & kCapChannels) != 0) {
        if (channels == 0 || channels > 64 || channel >= channels) {
            return Error(fmt::format("RDMA private data: channel {} of {} is not valid", channel, channels));
        }
        p.channel = channel;
        p.channels = channels;
        p.session = session;
    }
    if ((p.flags & kCapChunkSize) != 0) {
        if (chunk_shift < 20 || chunk_shift > 30) {
            return Error(fmt::format("RDMA private data: chunk size 2^{} is outside 1 MiB..1 GiB (x-rdma-chunk-size)",
                                     chunk_shift));
        }
        p.chunk_shift = chunk_shift;
    }
    return p;
}

std::vector<uint8_t> encode_message(Command type, uint32_t repeat, std::span<const uint8_t> data) {
    Out o;
    o.u32(static_cast<uint32_t>(data.size()));
    o.u32(static_cast<uint32_t>(type));
    o.u32(repeat);
    o.u32(0);  // padding
    o.bytes(data.data(), data.size());
    return std::move(o.b);
}

Result<size_t> message_size_in_stream(std::span<const uint8_t> header) {
    if (header.size() < kHeaderSize) return Error("RDMA control message header cut short");
    In in(header.first(kHeaderSize));
    uint32_t length = in.u32();
    if (length > kControlBufferSize - kHeaderSize) {
        return Error(fmt::format("RDMA control message in TLS announces {} bytes, more than a control buffer holds", length));
    }
    return kHeaderSize + length;
}

std::vector<uint8_t> encode_empty(Command type) { return encode_message(type, 1, {}); }

Result<Message> decode_message(std::span<const uint8_t> bytes) {
    if (bytes.size() < kHeaderSize) return Error(fmt::format("RDMA control message of {} bytes is shorter than its header", bytes.size()));
    if (bytes.size() > kControlBufferSize) return Error("RDMA control message larger than the control buffer");
    In in(bytes);
    Message m;
    m.header.length = in.u32();
    uint32_t type = in.u32();
    m.header.repeat = in.u32();
    in.u32();  // padding: QEMU leaves it uninitialised
    bool ours = type == static_cast<uint32_t>(Command::sums) || type == static_cast<uint32_t>(Command::tls);
    if ((type > static_cast<uint32_t>(Command::unregister_finished) && !ours) || type == 0) {
        return Error(fmt::format("RDMA control message of unknown type {}", type));
    }
    m.header.type = static_cast<Command>(type);
    const char* name = to_string(m.header.type);
    if (m.header.length != bytes.size() - kHeaderSize) {
        return Error(fmt::format("RDMA {} says {} data bytes but carries {}", name, m.header.length, bytes.size() - kHeaderSize));
    }
    if (size_t e = repeated_entry(m.header.type); e != 0) {
        if (m.header.repeat == 0 || m.header.repeat > kMaxRepeat) {
            return Error(fmt::format("RDMA {} repeats {} times (1 to {} allowed)", name, m.header.repeat, kMaxRepeat));
        }
        if (m.header.length != m.header.repeat * e) {
            return Error(fmt::format("RDMA {}: {} entries need {} bytes, the message has {}", name, m.header.repeat,
                                     m.header.repeat * e, m.header.length));
        }
    } else if (size_t c = counted_entry(m.header.type); c != 0) {
        if (m.header.length == 0 || m.header.length % c != 0 || m.header.length / c > kMaxRepeat) {
            return Error(fmt::format("RDMA {}: {} bytes are not 1 to {} entries of {} bytes", name, m.header.length,
                                     kMaxRepeat, c));
        }
    } else if (m.header.type == Command::sums) {
        if (m.header.repeat == 0 || m.header.repeat > kMaxRepeat || m.header.length / kSumsEntryHeaderSize < m.header.repeat) {
            return Error(fmt::format("RDMA SUMS: {} entries in {} bytes (1 to {} entries of 16 bytes and more)",
                                     m.header.repeat, m.header.length, kMaxRepeat));
        }
    } else if (m.header.type == Command::tls && m.header.length == 0) {
        return Error("RDMA TLS message with no record bytes");
    } else if (carries_nothing(m.header.type) && m.header.length != 0) {
        return Error(fmt::format("RDMA {} must carry no data", name));
    }
    auto d = in.take(m.header.length);
    m.data.assign(d.begin(), d.end());
    return m;
}

std::vector<uint8_t> encode_blocks(const std::vector<BlockDesc>& blocks) {
    Out o;
    for (const auto& b : blocks) {
        o.u64(b.host_addr);
        o.u64(b.offset);
        o.u64(b.length);
        o.u32(b.rkey);
        o.u32(0);
    }
    return encode_message(Command::ram_blocks_result, 1, o.b);  // QEMU's repeat: 1, whatever the count
}

Result<std::vector<BlockDesc>> decode_blocks(const Message& m) {
    if (auto s = expect(m, Command::ram_blocks_result); !s) return s.error();
    In in(m.data);
    std::vector<BlockDesc> out(m.data.size() / kBlockDescSize);
    for (auto& b : out) {
        b.host_addr = in.u64();
        b.offset = in.u64();
        b.length = in.u64();
        b.rkey = in.u32();
        in.u32();
    }
    return out;
}

std::vector<uint8_t> encode_register_entries(Command type, const std::vector<RegisterEntry>& entries) {
    Out o;
    for (const auto& r : entries) {
        o.u64(r.key);
        o.u32(r.block);
        o.u32(0);
        o.u64(r.extra_chunks);
    }
    return encode_message(type, static_cast<uint32_t>(entries.size()), o.b);
}

Result<std::vector<RegisterEntry>> decode_register_entries(const Message& m) {
    if (m.header.type != Command::register_request && m.header.type != Command::unregister_request) {
        return Error(fmt::format("RDMA control channel: expected a (un)register request, received {}", to_string(m.header.type)));
    }
    In in(m.data);
    std::vector<RegisterEntry> out(m.header.repeat);
    for (auto& r : out) {
        r.key = in.u64();
        r.block = in.u32();
        in.u32();
        r.extra_chunks = in.u64();
    }
    return out;
}

std::vector<uint8_t> encode_register_results(const std::vector<RegisterResult>& results) {
    Out o;
    for (const auto& r : results) {
        o.u32(r.rkey);
        o.u32(0);
        o.u64(r.host_addr);
    }
    return encode_message(Command::register_result, static_cast<uint32_t>(results.size()), o.b);
}

Result<std::vector<RegisterResult>> decode_register_results(const Message& m) {
    if (auto s = expect(m, Command::register_result); !s) return s.error();
    In in(m.data);
    std::vector<RegisterResult> out(m.data.size() / kRegisterResultSize);
    for (auto& r : out) {
        r.rkey = in.u32();
        in.u32();
        r.host_addr = in.u64();
    }
    return out;
}

std::vector<uint8_t> encode_compress(const std::vector<Compress>& entries) {
    Out o;
    for (const auto& c : entries) {
        o.u32(c.value);
        o.u32(c.block);
        o.u64(c.offset);
        o.u64(c.length);
    }
    return encode_message(Command::compress, static_cast<uint32_t>(entries.size()), o.b);
}

Result<std::vector<Compress>> decode_compress(const Message& m) {
    if (auto s = expect(m, Command::compress); !s) return s.error();
    In in(m.data);
    std::vector<Compress> out(m.header.repeat);
    for (auto& c : out) {
        c.value = in.u32();
        c.block = in.u32();
        c.offset = in.u64();
        c.length = in.u64();
        if (c.value > 0xff) return Error(fmt::format("RDMA COMPRESS fill value {} is not a byte", c.value));
    }
    return out;
}

std::vector<uint8_t> encode_sums(const std::vector<SumsEntry>& entries) {
    Out o;
    for (const auto& e : entries) {
        o.u32(e.block);
        o.u32(static_cast<uint32_t>(e.sums.size()));
        o.u64(e.offset);
        for (uint64_t v : e.sums) o.u64(v);
    }
    return encode_message(Command::sums, static_cast<uint32_t>(entries.size()), o.b);
}

Result<std::vector<SumsEntry>> decode_sums(const Message& m) {
    if (auto s = expect(m, Command::sums); !s) return s.error();
    In in(m.data);
    size_t left = m.data.size();
    std::vector<SumsEntry> out(m.header.repeat);
    for (size_t i = 0; i < out.size(); ++i) {
        if (left < kSumsEntryHeaderSize) return Error(fmt::format("RDMA SUMS: entry {} of {} is cut short", i + 1, out.size()));
        SumsEntry& e = out[i];
        e.block = in.u32();
        uint32_t count = in.u32();
        e.offset = in.u64();
        left -= kSumsEntryHeaderSize;
        if (count == 0 || count > left / sizeof(uint64_t)) {
            return Error(fmt::format("RDMA SUMS: entry {} announces {} sums, {} bytes are left", i + 1, count, left));
        }
        e.sums.resize(count);
        for (auto& v : e.sums) v = in.u64();
        left -= count * sizeof(uint64_t);
    }
    if (left != 0) return Error(fmt::format("RDMA SUMS: {} bytes after the last of {} entries", left, out.size()));
    return out;
}

std::vector<uint8_t> encode_error(const std::string& reason, bool with_text) {
    if (!with_text) return encode_empty(Command::error);
    std::string r = reason.substr(0, 1024);
    return encode_message(Command::error, 1, {reinterpret_cast<const uint8_t*>(r.data()), r.size()});
}

std::string decode_error(const Message& m) {
    std::string s;
    for (uint8_t c : m.data) s += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
    return s.empty() ? "the peer reported an error without a reason" : s;
}

}  // namespace rdma_migrate

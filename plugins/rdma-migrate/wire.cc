#include "wire.h"

#include <fmt/format.h>

#include <cstring>

namespace rdma_migrate {

namespace {

// Big-endian (network order) writer and bounds-checked reader.
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

size_t entry_size(Command c) {
    switch (c) {
        case Command::ram_blocks_result: return kBlockDescSize;
        case Command::register_request:
        case Command::unregister_request: return kChunkRangeSize;
        case Command::register_result: return kRegisterResultSize;
        case Command::compress: return kCompressSize;
        case Command::none:
        case Command::error:
        case Command::ready:
        case Command::qemu_file:
        case Command::ram_blocks_request:
        case Command::register_finished:
        case Command::unregister_finished: return 0;
    }
    return 0;
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
    }
    return "UNKNOWN";
}

std::vector<uint8_t> encode_private_data(const PrivateData& p) {
    Out o;
    o.u32(p.version);
    o.u32(p.flags);
    o.u32(p.channel);
    o.u32(p.channels);
    o.u64(p.session);
    o.u32(p.chunk_shift);
    o.u32(0);
    return std::move(o.b);
}

Result<PrivateData> decode_private_data(std::span<const uint8_t> bytes) {
    if (bytes.size() < 8) {
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
    if (bytes.size() < kPrivateDataSize) return p;  // the spec's 8-byte form: one channel, 1 MiB chunks
    p.channel = in.u32();
    p.channels = in.u32();
    p.session = in.u64();
    p.chunk_shift = in.u32();
    if (!(p.flags & kCapChannels)) {
        p.channel = 0;
        p.channels = 1;
    } else if (p.channels == 0 || p.channels > 64 || p.channel >= p.channels) {
        return Error(fmt::format("RDMA private data: channel {} of {} is not valid", p.channel, p.channels));
    }
    if (p.chunk_shift < 12 || p.chunk_shift > 30) {
        return Error(fmt::format("RDMA private data: chunk size 2^{} is outside 4 KiB..1 GiB", p.chunk_shift));
    }
    return p;
}

std::vector<uint8_t> encode_message(Command type, uint32_t repeat, std::span<const uint8_t> data) {
    Out o;
    o.u32(static_cast<uint32_t>(data.size()));
    o.u32(static_cast<uint32_t>(type));
    o.u32(repeat);
    o.bytes(data.data(), data.size());
    return std::move(o.b);
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
    if (type > static_cast<uint32_t>(Command::unregister_finished) || type == 0) {
        return Error(fmt::format("RDMA control message of unknown type {}", type));
    }
    m.header.type = static_cast<Command>(type);
    if (m.header.length != bytes.size() - kHeaderSize) {
        return Error(fmt::format("RDMA {} says {} data bytes but carries {}", to_string(m.header.type), m.header.length,
                                 bytes.size() - kHeaderSize));
    }
    if (m.header.repeat == 0 || m.header.repeat > kMaxRepeat) {
        return Error(fmt::format("RDMA {} repeats {} times (1 to {} allowed)", to_string(m.header.type), m.header.repeat, kMaxRepeat));
    }
    if (size_t e = entry_size(m.header.type); e != 0 && m.header.length != m.header.repeat * e) {
        return Error(fmt::format("RDMA {}: {} entries need {} bytes, the message has {}", to_string(m.header.type),
                                 m.header.repeat, m.header.repeat * e, m.header.length));
    }
    if (carries_nothing(m.header.type) && m.header.length != 0) {
        return Error(fmt::format("RDMA {} must carry no data", to_string(m.header.type)));
    }
    auto d = in.take(m.header.length);
    m.data.assign(d.begin(), d.end());
    return m;
}

std::vector<uint8_t> encode_blocks(const std::vector<BlockDesc>& blocks) {
    Out o;
    for (const auto& b : blocks) {
        char name[64] = {};
        std::memcpy(name, b.name.data(), std::min<size_t>(b.name.size(), 63));
        o.bytes(name, sizeof(name));
        o.u64(b.host_addr);
        o.u64(b.guest_addr);
        o.u64(b.length);
        o.u32(b.rkey);
        o.u32(0);
    }
    return encode_message(Command::ram_blocks_result, static_cast<uint32_t>(blocks.size()), o.b);
}

Result<std::vector<BlockDesc>> decode_blocks(const Message& m) {
    if (auto s = expect(m, Command::ram_blocks_result); !s) return s.error();
    In in(m.data);
    std::vector<BlockDesc> out;
    for (uint32_t i = 0; i < m.header.repeat; ++i) {
        auto name = in.take(64);
        if (name[63] != 0) return Error(fmt::format("RDMA RAM block {}: name is not terminated", i));
        BlockDesc b;
        b.name.assign(reinterpret_cast<const char*>(name.data()), strnlen(reinterpret_cast<const char*>(name.data()), 63));
        b.host_addr = in.u64();
        b.guest_addr = in.u64();
        b.length = in.u64();
        b.rkey = in.u32();
        in.u32();
        if (b.name.empty()) return Error(fmt::format("RDMA RAM block {} has no name", i));
        out.push_back(std::move(b));
    }
    return out;
}

std::vector<uint8_t> encode_chunk_ranges(Command type, const std::vector<ChunkRange>& ranges) {
    Out o;
    for (const auto& r : ranges) {
        o.u32(r.block);
        o.u32(0);
        o.u64(r.first);
        o.u64(r.count);
    }
    return encode_message(type, static_cast<uint32_t>(ranges.size()), o.b);
}

Result<std::vector<ChunkRange>> decode_chunk_ranges(const Message& m) {
    if (m.header.type != Command::register_request && m.header.type != Command::unregister_request) {
        return Error(fmt::format("RDMA control channel: expected a (un)register request, received {}", to_string(m.header.type)));
    }
    In in(m.data);
    std::vector<ChunkRange> out(m.header.repeat);
    for (auto& r : out) {
        r.block = in.u32();
        in.u32();
        r.first = in.u64();
        r.count = in.u64();
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
    std::vector<RegisterResult> out(m.header.repeat);
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

std::vector<uint8_t> encode_error(const std::string& reason) {
    std::string r = reason.substr(0, 1024);
    return encode_message(Command::error, 1, {reinterpret_cast<const uint8_t*>(r.data()), r.size()});
}

std::string decode_error(const Message& m) {
    std::string s;
    for (uint8_t c : m.data) s += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
    return s.empty() ? "the peer reported an error without a reason" : s;
}

}  // namespace rdma_migrate

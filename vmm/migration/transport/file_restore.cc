// The destination's side of file:PATH: the file is checked when vmm starts listening on it (its
// header, this machine's shape, its length, its stream's sum), so a wrong file is one line at
// once; its RAM is read in the first round, every page checked against its slot as it lands.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "vmm/common/fd.h"
#include "vmm/migration/transport/file_io.h"
#include "vmm/migration/transport/landing.h"
#include "vmm/migration/wire/file_format.h"

namespace vmm::migration::file {

namespace {

constexpr uint64_t kPage = kStreamPageSize;
constexpr uint64_t kReadPiece = 8u << 20;

struct Opened {
    UniqueFd fd;
    std::string path;
    uint64_t base = 0;
    FileHeader header;
    std::vector<uint8_t> stream;
};

// The RAM area into guest RAM: data extents read in place, holes left (made) zero, and every
// page's slot compared with what landed.
class RamReader final : public DestRamChannel {
public:
    RamReader(const Opened& file, std::vector<RamBlockView> blocks) : file_(file), blocks_(std::move(blocks)) {}

    Status serve_round(uint32_t round) override {
        (void)round;
        if (loaded_) return {};  // the file holds each page's last copy: it is all read in the first round
        loaded_ = true;
        for (uint32_t i = 0; i < blocks_.size(); ++i)
            if (auto s = load_block(i); !s) return s;
        return {};
    }
    ChannelCounts counts() const override { return counts_; }
    Status verify_with(RamVerifier* verifier) override {
        (void)verifier;  // every page is checked against its slot whether verify-ram is on or not
        return {};
    }

private:
    Status load_block(uint32_t i);
    Status load_data(uint32_t i, uint64_t from, uint64_t to);
    Status load_hole(uint32_t i, uint64_t from, uint64_t to);
    Error damaged(uint32_t i, uint64_t offset, const char* why) const {
        return Error(fmt::format("file:{}: block '{}', page at offset {:#x}: {}: the file is damaged", file_.path,
                                 blocks_[i].name, offset, why));
    }

    const Opened& file_;
    std::vector<RamBlockView> blocks_;
    std::vector<uint64_t> slots_;  // the block being read
    bool loaded_ = false;
    ChannelCounts counts_;
};

// Walks the block's part of the file by its data and its holes (SEEK_DATA/SEEK_HOLE), so a
// sparse save reads only what it holds.
Status RamReader::load_block(uint32_t i) {
    const FileBlock& b = file_.header.blocks[i];
    std::vector<uint8_t> raw(sums_bytes(b.size));
    if (auto s = read_at(file_.fd.get(), raw, file_.base + b.sums_offset, "file:" + file_.path); !s) return s;
    slots_.assign(raw.size() / 8, 0);
    for (size_t p = 0; p < slots_.size(); ++p)
        for (size_t k = 0; k < 8; ++k) slots_[p] |= static_cast<uint64_t>(raw[p * 8 + k]) << (8 * k);
    const uint64_t start = file_.base + b.ram_offset, end = start + b.size;
    auto page_down = [start](uint64_t at) { return start + (at - start) / kPage * kPage; };
    for (uint64_t at = start; at < end;) {
        off_t data = ::lseek(file_.fd.get(), static_cast<off_t>(at), SEEK_DATA);
        if (data < 0 && errno != ENXIO) return Error::from_errno(fmt::format("reading file:{}", file_.path));
        uint64_t from = data < 0 ? end : page_down(std::min<uint64_t>(static_cast<uint64_t>(data), end));
        if (auto s = load_hole(i, at - start, from - start); !s) return s;
        if (from >= end) break;
        off_t hole = ::lseek(file_.fd.get(), static_cast<off_t>(from), SEEK_HOLE);
        uint64_t to = hole < 0 ? end : std::min<uint64_t>(page_down(static_cast<uint64_t>(hole) + kPage - 1), end);
        if (to <= from) to = std::min(end, from + kPage);
        if (auto s = load_data(i, from - start, to - start); !s) return s;
        at = to;
    }
    return {};
}

Status RamReader::load_data(uint32_t i, uint64_t from, uint64_t to) {
    const FileBlock& b = file_.header.blocks[i];
    for (uint64_t at = from; at < to; at += kReadPiece) {
        uint64_t n = std::min(kReadPiece, to - at);
        uint8_t* host = blocks_[i].host + at;
        if (auto s = read_at(file_.fd.get(), {host, n}, file_.base + b.ram_offset + at, "file:" + file_.path); !s) return s;
        for (uint64_t p = 0; p < n; p += kPage) {
            uint64_t slot = page_slot(host + p);
            if (slot != slots_[(at + p) / kPage]) return damaged(i, at + p, "its contents do not match the sum saved with it");
            if (slot == 0) {
                ++counts_.zero_pages;
            } else {
                ++counts_.pages;
                counts_.bytes += kPage;
            }
        }
    }
    return {};
}

Status RamReader::load_hole(uint32_t i, uint64_t from, uint64_t to) {
    if (to <= from) return {};
    for (uint64_t p = from; p < to; p += kPage)
        if (slots_[p / kPage] != 0) return damaged(i, p, "the save wrote data there, and the file holds none");
    zero_pages(blocks_[i].host + from, to - from);  // fresh RAM reads zero already; this makes sure
    counts_.zero_pages += (to - from) / kPage;
    return {};
}

class FileRestore final : public Connection {
public:
    FileRestore(Opened file, std::vector<RamBlockView> blocks)
        : file_(std::move(file)), stream_(std::move(file_.stream)), ram_(file_, std::move(blocks)) {}
    ByteStream& stream() override { return stream_; }
    DestRamChannel* dest_ram() override { return &ram_; }
    std::string describe() const override { return "file:" + file_.path; }
    bool answers() const override { return false; }

private:
    Opened file_;
    MemoryStream stream_;  // what it answers goes nowhere
    RamReader ram_;
};

class FileListener final : public Listener {
public:
    FileListener(Opened file, std::vector<RamBlockView> blocks)
        : path_(file.path), file_(std::move(file)), blocks_(std::move(blocks)) {}
    Result<std::unique_ptr<Connection>> accept() override {
        if (!file_) return Error(fmt::format("file:{} was read already", path_));
        auto conn = std::make_unique<FileRestore>(std::move(*file_), blocks_);
        file_.reset();
        return std::unique_ptr<Connection>(std::move(conn));
    }
    std::string describe() const override { return "file:" + path_; }

private:
    std::string path_;
    std::optional<Opened> file_;
    std::vector<RamBlockView> blocks_;
};

// The saved machine's shape against this one's: every block by name, size and address, and the vCPUs.
Status check_machine(const Opened& f, const TransportContext& ctx) {
    const FileHeader& h = f.header;
    auto shape = [](uint64_t n, uint64_t bytes) { return fmt::format("{} block(s), {} MiB", n, bytes >> 20); };
    uint64_t saved = 0, here = 0;
    for (const auto& b : h.blocks) saved += b.size;
    for (const auto& b : ctx.blocks) here += b.size;
    bool same = h.blocks.size() == ctx.blocks.size();
    for (size_t i = 0; same && i < h.blocks.size(); ++i) {
        same = h.blocks[i].name == ctx.blocks[i].name && h.blocks[i].size == ctx.blocks[i].size &&
               h.blocks[i].guest_addr == ctx.blocks[i].guest_addr;
    }
    if (!same) {
        return Error(fmt::format("file:{} holds a guest with {} of RAM; this machine has {}: start vmm with the saved "
                                 "guest's memory (-m {}M)",
                                 f.path, shape(h.blocks.size(), saved), shape(ctx.blocks.size(), here), h.blocks[0].size >> 20));
    }
    if (h.vcpu_count != ctx.vcpu_count) {
        return Error(fmt::format("file:{} holds a guest with {} vCPU(s); this machine has {}: start vmm with --smp {}",
                                 f.path, h.vcpu_count, ctx.vcpu_count, h.vcpu_count));
    }
    return {};
}

Result<FileHeader> read_header(const Opened& f, uint64_t size) {
    if (size < f.base + kFileHeaderSize) {
        return Error(fmt::format("file:{}: {} bytes from offset {}, too short to be a saved guest (truncated?)", f.path,
                                 size > f.base ? size - f.base : 0, f.base));
    }
    std::vector<uint8_t> page(kFileHeaderSize);
    if (auto s = read_at(f.fd.get(), page, f.base, "file:" + f.path); !s) return s.error();
    auto h = decode_file_header(page);
    if (!h) return h.error().context("file:" + f.path);
    if (size < f.base + file_end(*h)) {
        return Error(fmt::format("file:{} is truncated: it has {} bytes, the save needs {}", f.path, size,
                                 f.base + file_end(*h)));
    }
    return h;
}

}  // namespace

Result<std::unique_ptr<Listener>> open_restore(const TransportContext& ctx) {
    Opened f;
    f.path = ctx.uri.path;
    f.base = ctx.uri.offset;
    f.fd.reset(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!f.fd) return Error::from_errno(fmt::format("opening file:{}", f.path));
    struct stat st {};
    if (::fstat(f.fd.get(), &st) != 0) return Error::from_errno(fmt::format("file:{}", f.path));
    if (!S_ISREG(st.st_mode)) return Error(fmt::format("file:{} is not a regular file", f.path));
    auto header = read_header(f, static_cast<uint64_t>(st.st_size));
    if (!header) return header.error();
    f.header = std::move(*header);
    if (auto s = check_machine(f, ctx); !s) return s.error();
    f.stream.resize(f.header.stream_length);
    if (auto s = read_at(f.fd.get(), f.stream, f.base + f.header.stream_offset, "file:" + f.path); !s) return s.error();
    if (XXH3_64bits(f.stream.data(), f.stream.size()) != f.header.stream_sum) {
        return Error(fmt::format("file:{}: its stream (the device state) is damaged: its sum does not match", f.path));
    }
    return std::unique_ptr<Listener>(std::make_unique<FileListener>(std::move(f), ctx.blocks));
}

}  // namespace vmm::migration::file

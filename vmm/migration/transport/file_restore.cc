// The destination's side of file:PATH: the file is checked when vmm starts listening on it (its
// header, this machine's shape, its length, its stream's sum), so a wrong file is one line at
// once; its RAM is read in the first round, every page checked against its slot as it lands, or
// (x-restore-mapped) mapped by the caller and checked in the background, or (x-restore-lazy)
// brought in by the caller while the guest runs, each page checked as it is read.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "vmm/common/fd.h"
#include "vmm/common/log.h"
#include "vmm/common/parallel.h"
#include "vmm/migration/transport/file_io.h"
#include "vmm/migration/transport/file_ram.h"
#include "vmm/migration/transport/landing.h"
#include "vmm/migration/transport/pull.h"
#include "vmm/migration/wire/file_format.h"

namespace vmm::migration::file {

namespace {

constexpr uint64_t kPage = kStreamPageSize;
constexpr uint64_t kReadPiece = 8u << 20;
// A read restore's pieces (a huge page each: what one THP fault makes), shared by at most this
// many threads (fewer on fewer cores).
constexpr uint64_t kInPlacePiece = 2u << 20;
constexpr unsigned kReadThreads = 4;
// A pulled save's background fill reads this much at a time: several READs at once (a fault
// waits behind at most one such read).
constexpr uint64_t kPulledPiece = 4u << 20;

struct Opened {
    UniqueFd fd;
    std::shared_ptr<PulledFile> remote;  // rdma-pull: the server's copy, read instead of fd
    std::string path;
    std::string name;  // "file:PATH", or the server's URI
    uint64_t base = 0;  // where the save starts in the file (offset=)
    FileHeader header;
    std::vector<uint8_t> stream;
    std::unique_ptr<Opened> under;  // an incremental save's base (file-base), opened and checked
};

constexpr int kMaxChain = 64;  // saves an incremental one may build on, one over the other

// Bytes [at, at + out.size()) of the save, whole: from its file, or from the server's copy.
Status read_bytes(const Opened& f, std::span<uint8_t> out, uint64_t at) {
    if (f.remote) return f.remote->read(out, at);
    return read_at(f.fd.get(), out, at, f.name);
}

Error damaged(const Opened& f, uint32_t i, uint64_t offset, const char* why) {
    return Error(fmt::format("{}: block '{}', page at offset {:#x}: {}: the file is damaged", f.name,
                             f.header.blocks[i].name, offset, why));
}

// Block i's slots, one a page.
Result<std::vector<uint64_t>> read_slots(const Opened& f, uint32_t i) {
    const FileBlock& b = f.header.blocks[i];
    std::vector<uint8_t> raw(sums_bytes(b.size));
    if (auto s = read_bytes(f, raw, f.base + b.sums_offset); !s) return s.error();
    std::vector<uint64_t> slots(raw.size() / 8, 0);
    for (size_t p = 0; p < slots.size(); ++p)
        for (size_t k = 0; k < 8; ++k) slots[p] |= static_cast<uint64_t>(raw[p * 8 + k]) << (8 * k);
    return slots;
}

using Range = std::function<Status(uint64_t from, uint64_t to)>;  // offsets in the block

// A pulled save's block i by its slots: a run of zero pages (slot 0) is a hole, anything else
// data (an incremental save is never pulled, so no slot says kSlotInBase).
Status walk_slots(const std::vector<uint64_t>& slots, const Range& hole, const Range& data) {
    for (uint64_t p = 0; p < slots.size();) {
        bool zero = slots[p] == 0;
        uint64_t q = p + 1;
        while (q < slots.size() && (slots[q] == 0) == zero) ++q;
        if (auto s = (zero ? hole : data)(p * kPage, q * kPage); !s) return s;
        p = q;
    }
    return {};
}

// Walks block i's part of the file by its data and its holes (SEEK_DATA/SEEK_HOLE), in order,
// so a sparse save reads only what it holds; a pulled one by its slots (`slots`, block i's).
Status walk(const Opened& f, uint32_t i, const std::vector<uint64_t>& slots, const Range& hole, const Range& data) {
    if (f.remote) return walk_slots(slots, hole, data);
    const uint64_t start = f.base + f.header.blocks[i].ram_offset, end = start + f.header.blocks[i].size;
    auto page_down = [start](uint64_t at) { return start + (at - start) / kPage * kPage; };
    for (uint64_t at = start; at < end;) {
        off_t found = ::lseek(f.fd.get(), static_cast<off_t>(at), SEEK_DATA);
        if (found < 0 && errno != ENXIO) return Error::from_errno(fmt::format("reading {}", f.name));
        uint64_t from = found < 0 ? end : page_down(std::min<uint64_t>(static_cast<uint64_t>(found), end));
        if (from > at) {
            if (auto s = hole(at - start, from - start); !s) return s;
        }
        if (from >= end) break;
        off_t gap = ::lseek(f.fd.get(), static_cast<off_t>(from), SEEK_HOLE);
        uint64_t to = gap < 0 ? end : std::min<uint64_t>(page_down(static_cast<uint64_t>(gap) + kPage - 1), end);
        if (to <= from) to = std::min(end, from + kPage);
        if (auto s = data(from - start, to - start); !s) return s;
        at = to;
    }
    return {};
}

// Block i's bytes [from, to) of the file, a piece (kReadPiece) at a time: each read into
// `buffer` (kReadPiece bytes), then handed to `then(at, bytes, n)`.
using PieceRead = std::function<Status(uint64_t at, const uint8_t* bytes, uint64_t n)>;
Status read_pieces(const Opened& f, uint32_t i, uint64_t from, uint64_t to, uint8_t* buffer, const PieceRead& then) {
    for (uint64_t at = from; at < to; at += kReadPiece) {
        uint64_t n = std::min(kReadPiece, to - at);
        uint64_t where = f.base + f.header.blocks[i].ram_offset + at;
        if (auto s = read_bytes(f, {buffer, n}, where); !s) return s;
        if (auto s = then(at, buffer, n); !s) return s;
    }
    return {};
}

// Pages [at, at + n) of block i, as read into `bytes`, against their slots.
Status check_pages(const Opened& f, uint32_t i, uint64_t at, const uint8_t* bytes, uint64_t n,
                   const std::vector<uint64_t>& slots, ChannelCounts* counts) {
    for (uint64_t p = 0; p < n; p += kPage) {
        uint64_t slot = page_slot(bytes + p);
        if (slot != slots[(at + p) / kPage]) return damaged(f, i, at + p, "its contents do not match the sum saved with it");
        if (counts == nullptr) continue;
        if (slot == 0) {
            ++counts->zero_pages;
        } else {
            ++counts->pages;
            counts->bytes += kPage;
        }
    }
    return {};
}

Status check_hole(const Opened& f, uint32_t i, uint64_t from, uint64_t to, const std::vector<uint64_t>& slots) {
    for (uint64_t p = from; p < to; p += kPage)
        if (slots[p / kPage] != 0) return damaged(f, i, p, "the save wrote data there, and the file holds none");
    return {};
}

// A mapped restore's check, while the guest runs: every page of the file against its slot,
// read through a buffer (the guest's mapping is not touched).
Status check_file(const Opened& f, const stream::CancelToken& cancel) {
    std::vector<uint8_t> buffer(kReadPiece);
    for (uint32_t i = 0; i < f.header.blocks.size(); ++i) {
        auto slots = read_slots(f, i);
        if (!slots) return slots.error();
        auto hole = [&](uint64_t from, uint64_t to) { return check_hole(f, i, from, to, *slots); };
        auto data = [&](uint64_t from, uint64_t to) {
            return read_pieces(f, i, from, to, buffer.data(),
                               [&](uint64_t at, const uint8_t* bytes, uint64_t n) -> Status {
                                   if (cancel.cancelled()) return Error("cancelled");
                                   return check_pages(f, i, at, bytes, n, *slots, nullptr);
                               });
        };
        if (auto s = walk(f, i, *slots, hole, data); !s) return s;
    }
    return {};
}

// Block i's slots for pages [first, first + count).
Result<std::vector<uint64_t>> read_slot_range(const Opened& f, uint32_t i, uint64_t first, uint64_t count) {
    std::vector<uint8_t> raw(count * 8);
    uint64_t where = f.base + f.header.blocks[i].sums_offset + first * 8;
    if (auto s = read_bytes(f, raw, where); !s) return s.error();
    std::vector<uint64_t> slots(count, 0);
    for (size_t p = 0; p < count; ++p)
        for (size_t k = 0; k < 8; ++k) slots[p] |= static_cast<uint64_t>(raw[p * 8 + k]) << (8 * k);
    return slots;
}

// A lazy restore's reads, on the caller's threads once the guest may run: nothing is read up
// front, so the guest's start does not grow with its size. A range's pages and their slots are
// read together and compared.
struct LazySource {
    std::shared_ptr<const Opened> file;

    Status read(uint32_t i, uint64_t offset, std::span<uint8_t> into) const {
        const Opened& f = *file;
        if (i >= f.header.blocks.size() || offset % kPage != 0 || into.size() % kPage != 0 ||
            offset + into.size() > f.header.blocks[i].size) {
            return Error(fmt::format("internal: a lazy read past block {} of {}", i, f.name));
        }
        auto slots = read_slot_range(f, i, offset / kPage, into.size() / kPage);
        if (!slots) return slots.error();
        uint64_t where = f.base + f.header.blocks[i].ram_offset + offset;
        if (auto s = read_bytes(f, into, where); !s) return s;
        for (uint64_t p = 0; p < into.size(); p += kPage) {
            if (page_slot(into.data() + p) != (*slots)[p / kPage]) {
                return damaged(f, i, offset + p, "its contents do not match the sum saved with it");
            }
        }
        return {};
    }
    Result<std::vector<std::pair<uint64_t, uint64_t>>> extents(uint32_t i) const {
        std::vector<std::pair<uint64_t, uint64_t>> out;
        if (i >= file->header.blocks.size()) return out;
        auto slots = read_slots(*file, i);  // for the holes' check
        if (!slots) return slots.error();
        auto hole = [&](uint64_t from, uint64_t to) { return check_hole(*file, i, from, to, *slots); };
        auto data = [&](uint64_t from, uint64_t to) -> Status {
            out.emplace_back(from, to);
            return {};
        };
        if (auto s = walk(*file, i, *slots, hole, data); !s) return s.error();
        return out;
    }
};

enum class Restore { read, mapped, lazy };

// The RAM area into guest RAM: data extents read in place, holes left (made) zero, and every
// page's slot compared with what landed. Mapped (x-restore-mapped) or lazy (x-restore-lazy), it
// reads nothing: the caller maps the file (mapped()) and checks it in the background, or
// brings its pages in while the guest runs (lazy()).
class RamReader final : public DestRamChannel, public FileRamSource {
public:
    RamReader(std::shared_ptr<const Opened> file, std::vector<RamBlockView> blocks, Restore how)
        : file_(std::move(file)), blocks_(std::move(blocks)), how_(how),
          lazy_(how == Restore::lazy ? std::make_shared<const LazySource>(LazySource{file_}) : nullptr) {}

    Status serve_round(uint32_t round) override {
        (void)round;
        // The file holds each page's last copy: it is all read in the first round.
        if (loaded_ || how_ != Restore::read) return {};
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
    FileRamSource* file_ram() override { return this; }
    std::optional<FileRam> mapped() override {
        if (how_ != Restore::mapped) return std::nullopt;
        FileRam m;
        m.fd = file_->fd.get();
        for (const auto& b : file_->header.blocks) m.offsets.push_back(file_->base + b.ram_offset);
        m.check = [file = file_](const stream::CancelToken& cancel) { return check_file(*file, cancel); };
        return m;
    }
    std::optional<LazyFileRam> lazy() override {
        if (how_ != Restore::lazy || !lazy_) return std::nullopt;
        LazyFileRam l;
        l.read = [src = lazy_](uint32_t i, uint64_t offset, std::span<uint8_t> into) { return src->read(i, offset, into); };
        l.extents = [src = lazy_](uint32_t i) { return src->extents(i); };
        if (file_->remote) l.piece = kPulledPiece;
        l.read_all = [this] {  // the connection lives until the restore is decided
            loaded_ = true;
            for (uint32_t i = 0; i < blocks_.size(); ++i)
                if (auto s = load_block(i); !s) return s;
            return Status{};
        };
        return l;
    }

private:
    Status load_block(uint32_t i);
    Status load_layer(const Opened& f, uint32_t i);
    Status read_in_place(const Opened& f, uint32_t i, const std::vector<std::pair<uint64_t, uint64_t>>& pieces,
                         const std::vector<uint64_t>& slots);

    std::shared_ptr<const Opened> file_;
    std::vector<RamBlockView> blocks_;
    Restore how_;
    std::shared_ptr<const LazySource> lazy_;
    bool loaded_ = false;
    ChannelCounts counts_;
};

// An incremental save over what its base put in guest RAM: a page it holds (its slot not
// kSlotInBase) replaces the base's, read through a buffer so that a page it leaves is never
// touched; a zero one is made zero.
Status load_over_base(const Opened& f, uint32_t i, uint8_t* host, ChannelCounts& counts) {
    auto slots = read_slots(f, i);
    if (!slots) return slots.error();
    std::vector<uint8_t> buffer(kReadPiece);
    auto apply = [&](uint64_t at, const uint8_t* bytes, uint64_t n) -> Status {
        for (uint64_t p = 0; p < n; p += kPage) {
            uint64_t slot = (*slots)[(at + p) / kPage];
            if (slot == kSlotInBase) continue;
            uint64_t got = bytes != nullptr ? page_slot(bytes + p) : 0;
            if (got != slot) return damaged(f, i, at + p, "its contents do not match the sum saved with it");
            if (bytes != nullptr) {
                std::memcpy(host + at + p, bytes + p, kPage);
            } else {
                zero_pages(host + at + p, kPage);
            }
            if (slot == 0) {
                ++counts.zero_pages;
            } else {
                ++counts.pages;
                counts.bytes += kPage;
            }
        }
        return {};
    };
    auto hole = [&](uint64_t from, uint64_t to) { return apply(from, nullptr, to - from); };
    auto data = [&](uint64_t from, uint64_t to) {
        return read_pieces(f, i, from, to, buffer.data(), apply);
    };
    return walk(f, i, *slots, hole, data);
}

Status RamReader::load_block(uint32_t i) {
    return load_layer(*file_, i);
}

// A save's pages of block i, its bases' first (the oldest at the bottom).
Status RamReader::load_layer(const Opened& f, uint32_t i) {
    if (f.under) {
        if (auto s = load_layer(*f.under, i); !s) return s;
        return load_over_base(f, i, blocks_[i].host, counts_);
    }
    auto slots = read_slots(f, i);
    if (!slots) return slots.error();
    std::vector<std::pair<uint64_t, uint64_t>> pieces;  // offset, length: at most kInPlacePiece each
    auto hole = [&](uint64_t from, uint64_t to) -> Status {
        if (auto s = check_hole(f, i, from, to, *slots); !s) return s;
        zero_pages(blocks_[i].host + from, to - from);  // fresh RAM reads zero already; this makes sure
        counts_.zero_pages += (to - from) / kPage;
        return {};
    };
    auto data = [&](uint64_t from, uint64_t to) -> Status {
        for (uint64_t at = from; at < to; at += kInPlacePiece) pieces.emplace_back(at, std::min(kInPlacePiece, to - at));
        return {};
    };
    if (auto s = walk(f, i, *slots, hole, data); !s) return s;
    return read_in_place(f, i, pieces, *slots);
}

// The data pieces of block i read straight into guest RAM and checked, on a few threads (the
// kernel zeroes each fresh page as it is first written: most of the time, and it scales with
// cores). A piece's pages are made in one call rather than one fault per page as the read fills them.
Status RamReader::read_in_place(const Opened& f, uint32_t i, const std::vector<std::pair<uint64_t, uint64_t>>& pieces,
                                const std::vector<uint64_t>& slots) {
    const unsigned workers = worker_count(kReadThreads);
    std::vector<ChannelCounts> counts(workers);
    Status s = for_each_parallel(pieces.size(), workers, [&](size_t k, unsigned w) -> Status {
        auto [at, n] = pieces[k];
        uint8_t* host = blocks_[i].host + at;
#ifdef MADV_POPULATE_WRITE
        ::madvise(host, n, MADV_POPULATE_WRITE);
#endif
        if (auto r = read_bytes(f, {host, n}, f.base + f.header.blocks[i].ram_offset + at); !r) return r;
        return check_pages(f, i, at, host, n, slots, &counts[w]);
    });
    for (const ChannelCounts& c : counts) {
        counts_.pages += c.pages;
        counts_.zero_pages += c.zero_pages;
        counts_.bytes += c.bytes;
    }
    return s;
}

class FileRestore final : public Connection {
public:
    FileRestore(std::shared_ptr<Opened> file, std::vector<uint8_t> stream, std::vector<RamBlockView> blocks, Restore how)
        : name_(file->name), stream_(std::move(stream)), ram_(std::move(file), std::move(blocks), how) {}
    stream::ByteStream& stream() override { return stream_; }
    DestRamChannel* dest_ram() override { return &ram_; }
    std::string describe() const override { return name_; }
    bool answers() const override { return false; }

private:
    std::string name_;
    stream::MemoryStream stream_;  // what it answers goes nowhere
    RamReader ram_;
};

class FileListener final : public Listener {
public:
    FileListener(Opened file, const TransportContext& ctx)
        : name_(file.name), file_(std::move(file)), blocks_(ctx.blocks), options_(ctx.options) {}
    Result<std::unique_ptr<Connection>> accept() override {
        if (!file_) return Error(fmt::format("{} was read already", name_));
        // The settings as they are now: x-restore-mapped set on the monitor after --incoming defer counts.
        auto how = restore_mode();
        if (!how) return how.error();
        std::vector<uint8_t> stream = std::move(file_->stream);
        auto conn = std::make_unique<FileRestore>(std::make_shared<Opened>(std::move(*file_)), std::move(stream), blocks_,
                                                  *how);
        file_.reset();
        return std::unique_ptr<Connection>(std::move(conn));
    }
    std::string describe() const override { return name_; }

private:
    // How the settings ask for RAM to come in: mapped (asked for) over lazily (the default) over
    // read. Mapping takes a full save; a chain asked to come in lazily is read instead. A pulled
    // save is never mapped (the file is on the server).
    Result<Restore> restore_mode() const {
        Options o = options_ ? options_() : Options{};
        if (o.caps.restore_mapped && file_->remote) {
            return Error(fmt::format("{} is pulled from its server, and x-restore-mapped maps a local file: pull it "
                                     "without x-restore-mapped (lazily, the default, or read whole before it runs)",
                                     name_));
        }
        if (o.caps.restore_mapped) {
            if (file_->under) {
                return Error(fmt::format("x-restore-mapped restores a full save, and {} builds on {}: restore it "
                                         "without x-restore-mapped",
                                         name_, file_->under->path));
            }
            return Restore::mapped;
        }
        if (!o.caps.restore_lazy) return Restore::read;
        if (file_->under) {
            log::info("{} builds on {}: read before the guest runs (a lazy restore takes a full save)", name_,
                      file_->under->path);
            return Restore::read;
        }
        return Restore::lazy;
    }

    std::string name_;
    std::optional<Opened> file_;
    std::vector<RamBlockView> blocks_;
    std::function<Options()> options_;
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
        return Error(fmt::format("{} holds a guest with {} of RAM; this machine has {}: start vmm with the saved "
                                 "guest's memory (-m {}M)",
                                 f.name, shape(h.blocks.size(), saved), shape(ctx.blocks.size(), here), h.blocks[0].size >> 20));
    }
    if (h.vcpu_count != ctx.vcpu_count) {
        return Error(fmt::format("{} holds a guest with {} vCPU(s); this machine has {}: start vmm with --smp {}",
                                 f.name, h.vcpu_count, ctx.vcpu_count, h.vcpu_count));
    }
    return {};
}

Result<FileHeader> read_header(const Opened& f, uint64_t size) {
    if (size < f.base + kFileHeaderSize) {
        return Error(fmt::format("{}: {} bytes from offset {}, too short to be a saved guest (truncated?)", f.name,
                                 size > f.base ? size - f.base : 0, f.base));
    }
    std::vector<uint8_t> page(kFileHeaderSize);
    if (auto s = read_bytes(f, page, f.base); !s) return s.error();
    auto h = decode_file_header(page);
    if (!h) return h.error().context(f.name);
    if (size < f.base + file_end(*h)) {
        return Error(fmt::format("{} is truncated: it has {} bytes, the save needs {}", f.name, size,
                                 f.base + file_end(*h)));
    }
    return h;
}

// The saves an incremental one builds on, each checked: its header, this machine's shape, its
// length, and that it is the very save its child names (a base saved again since breaks the chain).
Status open_bases(Opened& f, const TransportContext& ctx, int depth) {
    if (f.header.base_id == 0) return {};
    if (depth > kMaxChain) return Error(fmt::format("file:{}: a chain of more than {} saves", f.path, kMaxChain));
    auto under = std::make_unique<Opened>();
    under->path = f.header.base_path;
    under->fd.reset(::open(under->path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!under->fd) return Error::from_errno(fmt::format("file:{} builds on {}, which cannot be opened", f.path, under->path));
    struct stat st {};
    if (::fstat(under->fd.get(), &st) != 0) return Error::from_errno(fmt::format("file:{}", under->path));
    auto header = read_header(*under, static_cast<uint64_t>(st.st_size));
    if (!header) return header.error();
    under->header = std::move(*header);
    if (under->header.save_id != f.header.base_id) {
        return Error(fmt::format("file:{} builds on {}, which has been saved again since (it is another save now): the "
                                 "chain is broken",
                                 f.path, under->path));
    }
    if (auto s = check_machine(*under, ctx); !s) return s;
    if (auto s = open_bases(*under, ctx, depth + 1); !s) return s;
    f.under = std::move(under);
    return {};
}


// What both kinds of restore check once the header is in reach: the header, this machine's
// shape and the stream (the device state) against its sum.
Status open_common(Opened& f, const TransportContext& ctx, uint64_t size) {
    auto header = read_header(f, size);
    if (!header) return header.error();
    f.header = std::move(*header);
    if (auto s = check_machine(f, ctx); !s) return s;
    f.stream.resize(f.header.stream_length);
    if (auto s = read_bytes(f, f.stream, f.base + f.header.stream_offset); !s) return s;
    if (XXH3_64bits(f.stream.data(), f.stream.size()) != f.header.stream_sum) {
        return Error(fmt::format("{}: its stream (the device state) is damaged: its sum does not match", f.name));
    }
    return {};
}

}  // namespace

Result<std::unique_ptr<Listener>> open_restore(const TransportContext& ctx) {
    Opened f;
    f.path = ctx.uri.path;
    f.name = "file:" + f.path;
    f.base = ctx.uri.offset;
    f.fd.reset(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!f.fd) return Error::from_errno(fmt::format("opening file:{}", f.path));
    struct stat st {};
    if (::fstat(f.fd.get(), &st) != 0) return Error::from_errno(fmt::format("file:{}", f.path));
    if (!S_ISREG(st.st_mode)) return Error(fmt::format("file:{} is not a regular file", f.path));
    if (auto s = open_common(f, ctx, static_cast<uint64_t>(st.st_size)); !s) return s.error();
    if (auto s = open_bases(f, ctx, 1); !s) return s.error();
    return std::unique_ptr<Listener>(std::make_unique<FileListener>(std::move(f), ctx));
}

Result<std::unique_ptr<Listener>> open_pulled(const TransportContext& ctx, std::unique_ptr<PulledFile> pulled) {
    Opened f;
    f.name = f.path = pulled->describe();
    uint64_t size = pulled->size();
    f.remote = std::move(pulled);
    if (auto s = open_common(f, ctx, size); !s) return s.error();
    if (f.header.base_id != 0) {
        return Error(fmt::format("{} serves an incremental save, which builds on another file there: serve a full one "
                                 "(vmm-snapshot merge makes one)",
                                 f.name));
    }
    return std::unique_ptr<Listener>(std::make_unique<FileListener>(std::move(f), ctx));
}

}  // namespace vmm::migration::file

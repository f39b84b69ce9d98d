// The source's side of file:PATH: a Connection whose RAM channel writes each page at its own
// place in the file and whose stream is kept until the save commits (file_transport.h).
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

#include <xxhash.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "vmm/common/fd.h"
#include "vmm/migration/transport/file_io.h"
#include "vmm/migration/transport/file_ram.h"
#include "vmm/migration/wire/file_format.h"

namespace vmm::migration::file {

namespace {


// The stream area, held in memory until the commit: the rounds' markers and the device state.
class StreamArea final : public stream::ByteStream {
public:
    using stream::ByteStream::write;
    Status write(std::span<const std::span<const uint8_t>> buffers) override {
        for (auto b : buffers) {
            if (bytes_.size() + b.size() > kMaxFileStream) {
                return Error(fmt::format("the saved guest's stream would pass {} MiB", kMaxFileStream >> 20));
            }
            bytes_.insert(bytes_.end(), b.begin(), b.end());
        }
        return {};
    }
    Status read_exact(std::span<uint8_t> out) override {
        (void)out;
        return Error("internal: a save to a file has nobody to answer it");
    }
    const std::vector<uint8_t>& bytes() const { return bytes_; }

private:
    std::vector<uint8_t> bytes_;
};

// The RAM area: a page goes to its own offset (a later round's copy over the earlier one), its
// slot beside it in the sums area; a zero page becomes a hole.
class RamArea final : public SourceRamChannel {
public:
    RamArea(int fd, uint64_t base, const FileHeader& layout, std::vector<RamBlockView> blocks, const stream::CancelToken* cancel,
            std::string what)
        : fd_(fd), base_(base), layout_(layout), blocks_(std::move(blocks)), cancel_(cancel), what_(std::move(what)) {}
    // Fills the sums area with kSlotInBase: every page is the base's until this save writes it.
    Status leave_to_base() {
        std::vector<uint8_t> ones(1u << 20, 0xff);
        for (const auto& b : layout_.blocks) {
            for (uint64_t done = 0, n = sums_bytes(b.size); done < n; done += ones.size()) {
                size_t piece = static_cast<size_t>(std::min<uint64_t>(ones.size(), n - done));
                if (auto s = write_at(fd_, {ones.data(), piece}, base_ + b.sums_offset + done, what_); !s) return s;
            }
        }
        return {};
    }

    Status begin_round(uint32_t round) override {
        round_ = round;
        return {};
    }
    Status end_round() override { return {}; }
    bool verifies() const override { return true; }  // every page's slot goes with it, always

    Status send(uint32_t block, uint64_t offset, uint64_t length) override {
        if (auto s = check(block, offset, length); !s) return s;
        const uint8_t* host = blocks_[block].host + offset;
        std::vector<uint64_t> slots(length / kStreamPageSize);
        for (size_t i = 0; i < slots.size(); ++i) slots[i] = page_slot(host + i * kStreamPageSize);  // before the copy, as read
        if (auto s = write_at(fd_, {host, length}, base_ + layout_.blocks[block].ram_offset + offset, what_); !s) return s;
        return write_slots(block, offset, slots);
    }

    Status send_zero(uint32_t block, uint64_t offset, uint64_t length) override {
        if (auto s = check(block, offset, length); !s) return s;
        // The bulk round of a full save writes into holes: a zero page is one already. An
        // incremental save's first round is a dirty one: the page was the base's until now.
        if (round_ == 0 && layout_.base_id == 0) return {};
        uint64_t at = base_ + layout_.blocks[block].ram_offset + offset;
        if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(at),
                        static_cast<off_t>(length)) != 0) {
            std::vector<uint8_t> zeros(std::min<uint64_t>(length, 1u << 20), 0);  // a file system without holes
            for (uint64_t done = 0; done < length; done += zeros.size()) {
                size_t n = static_cast<size_t>(std::min<uint64_t>(zeros.size(), length - done));
                if (auto s = write_at(fd_, {zeros.data(), n}, at + done, what_); !s) return s;
            }
        }
        return write_slots(block, offset, std::vector<uint64_t>(length / kStreamPageSize, 0));
    }

private:
    Status check(uint32_t block, uint64_t offset, uint64_t length) const {
        if (cancel_ != nullptr && cancel_->cancelled()) return Error("migration cancelled");
        if (block >= blocks_.size() || offset % kStreamPageSize != 0 || length % kStreamPageSize != 0 || length > blocks_[block].size ||
            offset > blocks_[block].size - length) {
            return Error(fmt::format("internal: pages [{:#x}, +{:#x}) of block {} are not in the saved layout", offset,
                                     length, block));
        }
        return {};
    }

    Status write_slots(uint32_t block, uint64_t offset, std::span<const uint64_t> slots) {
        std::vector<uint8_t> bytes(slots.size() * 8);
        for (size_t i = 0; i < slots.size(); ++i)
            for (size_t k = 0; k < 8; ++k) bytes[i * 8 + k] = static_cast<uint8_t>(slots[i] >> (8 * k));
        return write_at(fd_, bytes, base_ + layout_.blocks[block].sums_offset + offset / kStreamPageSize * 8, what_);
    }

    int fd_;
    uint64_t base_;
    const FileHeader& layout_;
    std::vector<RamBlockView> blocks_;
    const stream::CancelToken* cancel_;
    std::string what_;
    uint32_t round_ = 0;
};

class FileSave final : public Connection, public SaveTarget {
public:
    FileSave(UniqueFd fd, std::string path, std::string temp, uint64_t base, FileHeader layout,
             const TransportContext& ctx)
        : fd_(std::move(fd)), path_(std::move(path)), temp_(std::move(temp)), base_(base), layout_(std::move(layout)),
          ram_(fd_.get(), base_, layout_, ctx.blocks, ctx.cancel, path_) {}
    ~FileSave() override {
        if (committed_) return;
        // Nothing that looks like a save is left: the temporary file goes, and a save in place
        // gives back what it wrote past its offset (its header was never written).
        if (!temp_.empty()) ::unlink(temp_.c_str());
        else (void)::ftruncate(fd_.get(), static_cast<off_t>(base_));
    }
    stream::ByteStream& stream() override { return stream_; }
    SourceRamChannel* source_ram() override { return &ram_; }
    std::string describe() const override { return "file:" + path_; }
    bool answers() const override { return false; }
    SaveTarget* save_target() override { return this; }
    std::optional<uint64_t> builds_on() const override {
        return layout_.base_id != 0 ? std::optional(layout_.base_id) : std::nullopt;
    }
    uint64_t save_id() const override { return layout_.save_id; }
    Status commit() override;
    // Sized to the end of its sums now, a hole throughout: pages land in place, zero ones stay
    // holes (anything a file had past the offset goes first).
    Status size_areas() {
        if (::ftruncate(fd_.get(), static_cast<off_t>(base_)) != 0 ||
            ::ftruncate(fd_.get(), static_cast<off_t>(base_ + layout_.stream_offset)) != 0) {
            return Error::from_errno(fmt::format("sizing {} for a save of {} MiB", path_, layout_.stream_offset >> 20));
        }
        return layout_.base_id != 0 ? ram_.leave_to_base() : Status{};
    }

private:
    Status sync(const char* when) {
        if (::fdatasync(fd_.get()) == 0) return {};
        return Error::from_errno(fmt::format("syncing {} ({})", path_, when), errno, "the save is incomplete");
    }

    UniqueFd fd_;
    std::string path_, temp_;  // temp_: where it is written until the commit (empty: in place)
    uint64_t base_;
    FileHeader layout_;
    StreamArea stream_;
    RamArea ram_;
    bool committed_ = false;
};

// The stream, then everything synced, then the header, synced: until that last write the file
// has no header, so a crash at any point leaves nothing that looks like a save. Then the name.
Status FileSave::commit() {
    const auto& bytes = stream_.bytes();
    layout_.stream_length = bytes.size();
    layout_.stream_sum = XXH3_64bits(bytes.data(), bytes.size());
    if (auto s = write_at(fd_.get(), bytes, base_ + layout_.stream_offset, path_); !s) return s;
    auto header = encode_file_header(layout_);
    if (!header) return header.error();
    if (auto s = sync("its pages"); !s) return s;
    if (auto s = write_at(fd_.get(), *header, base_, path_); !s) return s;
    if (auto s = sync("its header"); !s) return s;
    if (!temp_.empty()) {
        if (::rename(temp_.c_str(), path_.c_str()) != 0) return Error::from_errno(fmt::format("naming {} {}", temp_, path_));
        UniqueFd dir(::open(std::filesystem::path(path_).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (dir && ::fsync(dir.get()) != 0) return Error::from_errno(fmt::format("syncing the directory of {}", path_));
    }
    committed_ = true;
    return {};
}

// A temporary file beside PATH (mode 0600: it holds the guest's memory), or PATH itself when the
// save starts at an offset (whoever wrote the bytes before it owns the file).
Result<std::pair<UniqueFd, std::string>> open_target(const std::string& path, uint64_t base) {
    if (base != 0) {
        UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
        if (!fd) return Error::from_errno(fmt::format("opening {}", path));
        return std::pair{std::move(fd), std::string()};
    }
    std::filesystem::path p(path);
    std::string temp = (p.parent_path() / ("." + p.filename().string() + ".partial-XXXXXX")).string();
    UniqueFd fd(::mkostemp(temp.data(), O_CLOEXEC));
    if (!fd) return Error::from_errno(fmt::format("creating a file beside {}", path), errno, "is its directory there and writable?");
    return std::pair{std::move(fd), temp};
}

}  // namespace

// file-base: the save an incremental one builds on, checked to be of this machine's shape. Its
// id goes into the new header, with its path made absolute (the new file may move elsewhere).
Status name_base(const std::string& base, const std::string& target, FileHeader& layout) {
    std::error_code ec;
    auto absolute = std::filesystem::absolute(base, ec).lexically_normal();
    if (ec) return Error(fmt::format("file-base {}: {}", base, ec.message()));
    if (absolute == std::filesystem::absolute(target, ec).lexically_normal()) {
        return Error(fmt::format("file-base {} is the file being written: an incremental save needs its base kept; name "
                                 "another file",
                                 base));
    }
    if (absolute.string().size() > kMaxBasePath) return Error(fmt::format("file-base: a path over {} bytes", kMaxBasePath));
    UniqueFd fd(::open(absolute.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return Error::from_errno(fmt::format("opening file-base {}", base));
    std::vector<uint8_t> page(kFileHeaderSize);
    if (auto s = read_at(fd.get(), page, 0, "file-base " + base); !s) return s;
    auto h = decode_file_header(page);
    if (!h) return h.error().context("file-base " + base);
    if (h->blocks.size() != layout.blocks.size()) return Error(fmt::format("file-base {} is of another machine", base));
    for (size_t i = 0; i < h->blocks.size(); ++i) {
        if (h->blocks[i].name != layout.blocks[i].name || h->blocks[i].size != layout.blocks[i].size) {
            return Error(fmt::format("file-base {} is of another machine (block '{}')", base, h->blocks[i].name));
        }
    }
    layout.base_id = h->save_id;
    layout.base_path = absolute.string();
    return {};
}

uint64_t new_save_id() {
    uint64_t id = 0;
    while (id == 0) {
        if (::getrandom(&id, sizeof id, 0) != static_cast<ssize_t>(sizeof id)) id = static_cast<uint64_t>(::time(nullptr));
    }
    return id;
}

Result<std::unique_ptr<Connection>> open_save(const TransportContext& ctx) {
    const std::string& path = ctx.uri.path;
    if (std::filesystem::is_directory(path)) return Error(fmt::format("file:{} is a directory: name a file", path));
    std::vector<BlockInfo> blocks;
    for (const auto& b : ctx.blocks) blocks.push_back({b.name, b.guest_addr, b.size});
    FileHeader layout = file_layout(blocks, ctx.vcpu_count);
    layout.save_id = new_save_id();
    Options options = ctx.options ? ctx.options() : Options{};
    if (auto b = options.params.transport.find(kBaseParameter); b != options.params.transport.end() && !b->second.empty()) {
        if (auto s = name_base(b->second, path, layout); !s) return s.error();
    }
    auto target = open_target(path, ctx.uri.offset);
    if (!target) return target.error();
    auto& [fd, temp] = *target;
    auto conn = std::make_unique<FileSave>(std::move(fd), path, temp, ctx.uri.offset, layout, ctx);
    if (auto s = conn->size_areas(); !s) return s.error();  // (the connection's end removes what it made)
    return std::unique_ptr<Connection>(std::move(conn));
}

}  // namespace vmm::migration::file

#include "vmm/memory/populated.h"

#include <fcntl.h>
#include <unistd.h>

namespace vmm::memory {

namespace {
constexpr uint64_t kPresent = 1ull << 63, kSwapped = 1ull << 62;
constexpr size_t kBatch = 64 * 1024;  // entries per read: 512 KiB of pagemap, 256 MiB of RAM
}  // namespace

Result<PagemapReader> PagemapReader::open() {
    int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Error::from_errno("open /proc/self/pagemap");
    return PagemapReader(UniqueFd(fd));
}

Status PagemapReader::for_each_populated_run(const RamBlock& block, const std::function<Status(uint64_t, uint64_t)>& fn) {
    auto base_vpage = reinterpret_cast<uint64_t>(block.host()) >> kPageShift;
    uint64_t pages = block.pages();
    uint64_t run_start = 0, run_len = 0;
    entries_.resize(kBatch);
    for (uint64_t first = 0; first < pages; first += kBatch) {
        uint64_t n = std::min<uint64_t>(kBatch, pages - first);
        auto bytes = static_cast<size_t>(n * sizeof(uint64_t));
        ssize_t r = ::pread(fd_.get(), entries_.data(), bytes, static_cast<off_t>((base_vpage + first) * sizeof(uint64_t)));
        if (r != static_cast<ssize_t>(bytes)) return Error::from_errno("read /proc/self/pagemap");
        for (uint64_t i = 0; i < n; ++i) {
            bool populated = (entries_[i] & (kPresent | kSwapped)) != 0;
            if (populated) {
                if (run_len == 0) run_start = first + i;
                ++run_len;
            } else if (run_len != 0) {
                if (auto s = fn(run_start, run_len); !s) return s;
                run_len = 0;
            }
        }
    }
    if (run_len != 0) return fn(run_start, run_len);
    return {};
}

Result<uint64_t> PagemapReader::populated_pages(const RamBlock& block) {
    uint64_t n = 0;
    auto s = for_each_populated_run(block, [&n](uint64_t, uint64_t count) -> Status {
        n += count;
        return {};
    });
    if (!s) return s.error();
    return n;
}

uint64_t pages_to_send(PagemapReader* pagemap, const RamBlock& block) {
    if (pagemap == nullptr || block.file_backed()) return block.pages();
    auto n = pagemap->populated_pages(block);
    return n ? *n : block.pages();
}

}  // namespace vmm::memory

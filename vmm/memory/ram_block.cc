#include "vmm/memory/ram_block.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cstring>

#include "vmm/common/zero_page.h"

namespace vmm::memory {

Status validate_block_spec(const RamBlockSpec& spec) {
    if (spec.name.empty() || spec.name.size() > 64) {
        return Error(fmt::format("RAM block name '{}' must be 1 to 64 characters", spec.name));
    }
    uint64_t align = spec.huge_pages == HugePages::hugetlbfs ? 2 * 1024 * 1024 : kPageSize;
    if (spec.size == 0 || spec.size % align != 0) {
        return Error(fmt::format("RAM block '{}': size {} must be a non-zero multiple of {}",
                                 spec.name, spec.size, align));
    }
    if (spec.guest_addr % align != 0) {
        return Error(fmt::format("RAM block '{}': address {:#x} must be a multiple of {}",
                                 spec.name, spec.guest_addr, align));
    }
    if (spec.guest_addr + spec.size < spec.guest_addr || spec.guest_addr + spec.size > (1ull << 46)) {
        return Error(fmt::format("RAM block '{}': [{:#x}, +{:#x}) lies beyond 64 TiB", spec.name,
                                 spec.guest_addr, spec.size));
    }
    return {};
}

RamBlock::RamBlock(std::string name, uint64_t gpa, Mapping host, uint32_t slot)
    : name_(std::move(name)),
      guest_addr_(gpa),
      host_(std::move(host)),
      slot_(slot),
      dirty_(host_.size() >> kPageShift),
      recent_(host_.size() >> kPageShift) {}

RamBlock::RamBlock(RamBlock&& o) noexcept
    : name_(std::move(o.name_)),
      guest_addr_(o.guest_addr_),
      host_(std::move(o.host_)),
      slot_(o.slot_),
      dirty_(std::move(o.dirty_)),
      recent_(std::move(o.recent_)),
      dirtied_(o.dirtied_.load()),
      file_backed_(o.file_backed_) {}

Status RamBlock::map_file(int fd, uint64_t offset) {
    // MAP_FIXED over the block's own range: the memory slot KVM has keeps its address, and the
    // block's Mapping unmaps the range as before.
    void* at = ::mmap(host_.data(), host_.size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, fd,
                      static_cast<off_t>(offset));
    if (at == MAP_FAILED) return Error::from_errno(fmt::format("mapping the saved RAM of block '{}'", name_));
    file_backed_ = true;
    return {};
}

Status RamBlock::copy_out_of_file() {
    if (!file_backed_) return {};
    void* fresh = ::mmap(nullptr, host_.size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (fresh == MAP_FAILED) {
        return Error::from_errno(fmt::format("copying the RAM of block '{}' out of its file", name_), errno,
                                 "free memory for a copy of it");
    }
    auto* to = static_cast<uint8_t*>(fresh);
    for (size_t off = 0; off < host_.size(); off += kPageSize)
        if (!is_zero_page(host_.data() + off)) std::memcpy(to + off, host_.data() + off, kPageSize);
    // One step: the address never maps nothing, and KVM's slot follows (its MMU notifier).
    if (::mremap(fresh, host_.size(), host_.size(), MREMAP_MAYMOVE | MREMAP_FIXED, host_.data()) == MAP_FAILED) {
        int e = errno;
        ::munmap(fresh, host_.size());
        return Error::from_errno(fmt::format("putting the copy of block '{}' in place", name_), e);
    }
    file_backed_ = false;
    return {};
}

// Populates every page (zeroed by the kernel; the contents stay zero).
static Status preallocate(Mapping& m) {
#ifdef MADV_POPULATE_WRITE
    if (::madvise(m.data(), m.size(), MADV_POPULATE_WRITE) == 0) return {};
    if (errno != EINVAL) {
        return Error::from_errno(fmt::format("populating {} bytes", m.size()), errno,
                                 "free memory or drop --mem-prealloc / prealloc");
    }
#endif
    // A kernel without MADV_POPULATE_WRITE: touch each page (a read would map the zero page).
    for (size_t off = 0; off < m.size(); off += kPageSize) {
        volatile uint8_t* p = m.data() + off;
        *p = 0;
    }
    return {};
}

Result<RamBlock> RamBlock::create(const RamBlockSpec& spec, uint32_t slot) {
    if (auto s = validate_block_spec(spec); !s) return s.error();
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (spec.huge_pages == HugePages::hugetlbfs) flags |= MAP_HUGETLB;
    auto m = Mapping::map(spec.name.c_str(), spec.size, PROT_READ | PROT_WRITE, flags);
    if (!m) {
        if (spec.huge_pages == HugePages::hugetlbfs) {
            return Error(m.error().message() +
                         "; reserve huge pages (echo N > /proc/sys/vm/nr_hugepages) or set "
                         "huge_pages = \"transparent\"");
        }
        return m.error();
    }
    if (spec.huge_pages == HugePages::transparent) {
        // Advisory: a kernel without THP keeps small pages, which is still correct.
        ::madvise(m->data(), m->size(), MADV_HUGEPAGE);
    }
    if (spec.prealloc) {
        if (auto s = preallocate(*m); !s) return s.error().context("preallocating RAM block '" + spec.name + "'");
    }
    return RamBlock(spec.name, spec.guest_addr, std::move(*m), slot);
}

}  // namespace vmm::memory

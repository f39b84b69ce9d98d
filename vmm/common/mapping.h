// Mapping: a move-only owner of an mmap()ed region, unmapped in its destructor.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "vmm/common/result.h"

namespace vmm {

class Mapping {
public:
    Mapping() = default;
    Mapping(void* addr, size_t size) : addr_(addr), size_(size) {}
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    Mapping(Mapping&& o) noexcept
        : addr_(std::exchange(o.addr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    Mapping& operator=(Mapping&& o) noexcept {
        if (this != &o) {
            reset();
            addr_ = std::exchange(o.addr_, nullptr);
            size_ = std::exchange(o.size_, 0);
        }
        return *this;
    }
    ~Mapping() { reset(); }

    // mmap(nullptr, size, prot, flags, fd, offset); `what` names the mapping in the error.
    static Result<Mapping> map(const char* what, size_t size, int prot, int flags, int fd = -1,
                               off_t offset = 0);

    uint8_t* data() const { return static_cast<uint8_t*>(addr_); }
    size_t size() const { return size_; }
    template <typename T>
    T* as() const { return static_cast<T*>(addr_); }
    void reset() {
        if (addr_ != nullptr) ::munmap(addr_, size_);
        addr_ = nullptr;
        size_ = 0;
    }

private:
    void* addr_ = nullptr;
    size_t size_ = 0;
};

}  // namespace vmm

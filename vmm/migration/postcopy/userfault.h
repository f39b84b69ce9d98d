// Userfault: a userfaultfd over guest RAM in missing mode, the destination's hold on the pages
// it lacks in postcopy. A thread (the guest's vCPU inside KVM, or the VMM's own) that touches a
// registered page nobody placed sleeps in the kernel and is reported here; placing the page
// (UFFDIO_COPY, or UFFDIO_ZEROPAGE for a zero page) wakes it. Placing is atomic and never
// overwrites: a page already present is skipped, so what the guest wrote stays.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "vmm/common/fd.h"
#include "vmm/common/result.h"
#include "vmm/memory/guest_memory.h"

namespace vmm::migration {

class Userfault {
public:
    // Needs root (or vm.unprivileged_userfaultfd=1): KVM's faults on guest RAM come from the
    // kernel, which a user-mode-only userfaultfd would not see. The message says so.
    static Result<Userfault> open();

    Status register_range(uint8_t* addr, uint64_t length);
    // Places `length` bytes from `src` at `dst` (both page-aligned); pages already present are
    // skipped. Returns how many pages it placed.
    Result<uint64_t> copy(uint8_t* dst, const uint8_t* src, uint64_t length);
    // Maps the zero page over [dst, dst + length), skipping pages already present.
    Result<uint64_t> zero(uint8_t* dst, uint64_t length);
    // Wakes threads waiting on [dst, dst + length) (after a placement found the page present).
    Status wake(uint8_t* dst, uint64_t length);

    struct Fault {
        uint64_t address = 0;  // page-aligned
        uint32_t tid = 0;      // the faulting thread, 0 when the kernel cannot say
    };
    // The faults waiting to be read (the fd is non-blocking): empty when there are none.
    Result<std::vector<Fault>> read_faults();
    int fd() const { return fd_.get(); }

private:
    explicit Userfault(UniqueFd fd) : fd_(std::move(fd)) {}
    UniqueFd fd_;
};

// A userfaultfd over every block of guest RAM (what a postcopy and a lazy restore both hold);
// `hosts` gets where each block lives in this process.
Result<std::unique_ptr<Userfault>> userfault_over(const memory::GuestMemory& mem, std::vector<uint8_t*>& hosts);

}  // namespace vmm::migration

#include "vmm/migration/postcopy/userfault.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace vmm::migration {

namespace {
constexpr uint64_t kPage = 4096;

// The kernel fills `placed` with bytes placed, or a negative errno; the ioctl fails with EEXIST
// at the first page already present and with EAGAIN when the mappings changed under it.
template <typename Op, typename Field>
Result<uint64_t> place(int fd, unsigned long request, uint8_t* dst, uint64_t length, Op& op, Field field,
                       const uint8_t* src) {
    uint64_t pages = 0, done = 0;
    while (done < length) {
        if constexpr (requires { op.src; }) {
            op.dst = reinterpret_cast<uint64_t>(dst + done);
            op.src = reinterpret_cast<uint64_t>(src + done);
            op.len = length - done;
        } else {
            op.range = {reinterpret_cast<uint64_t>(dst + done), length - done};
        }
        op.mode = 0;
        op.*field = 0;
        int r = ::ioctl(fd, request, &op);
        int err = r < 0 ? errno : 0;
        int64_t placed = op.*field;
        if (placed > 0) {
            done += static_cast<uint64_t>(placed);
            pages += static_cast<uint64_t>(placed) / kPage;
        }
        if (r == 0) break;
        if (err == EEXIST) {
            done += kPage;  // present already (placed by the other path, or the guest's own): keep it
            continue;
        }
        if (err == EAGAIN || err == EINTR) continue;
        return Error::from_errno("placing a postcopy page (userfaultfd)", err);
    }
    return pages;
}
}  // namespace

Result<Userfault> Userfault::open() {
    int fd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
    if (fd < 0) {
        return Error::from_errno("userfaultfd", errno,
                                 "postcopy and a lazy restore need it for guest RAM: run vmm as root (or with CAP_SYS_PTRACE), or set "
                                 "vm.unprivileged_userfaultfd=1");
    }
    Userfault u{UniqueFd(fd)};
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = UFFD_FEATURE_THREAD_ID;
    if (::ioctl(fd, UFFDIO_API, &api) < 0) {
        api = {};  // a kernel without thread ids still serves missing faults
        api.api = UFFD_API;
        if (::ioctl(fd, UFFDIO_API, &api) < 0) return Error::from_errno("userfaultfd's API handshake (UFFDIO_API)");
    }
    return u;
}

Status Userfault::register_range(uint8_t* addr, uint64_t length) {
    uffdio_register reg{};
    reg.range = {reinterpret_cast<uint64_t>(addr), length};
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (::ioctl(fd_.get(), UFFDIO_REGISTER, &reg) < 0) {
        return Error::from_errno("registering guest RAM with userfaultfd", errno,
                                 "postcopy needs anonymous guest RAM on a kernel with userfaultfd");
    }
    if ((reg.ioctls & (1ull << _UFFDIO_COPY)) == 0 || (reg.ioctls & (1ull << _UFFDIO_ZEROPAGE)) == 0) {
        return Error("userfaultfd cannot place pages in guest RAM here (no UFFDIO_COPY/UFFDIO_ZEROPAGE)");
    }
    return {};
}

Result<uint64_t> Userfault::copy(uint8_t* dst, const uint8_t* src, uint64_t length) {
    uffdio_copy op{};
    return place(fd_.get(), UFFDIO_COPY, dst, length, op, &uffdio_copy::copy, src);
}

Result<uint64_t> Userfault::zero(uint8_t* dst, uint64_t length) {
    uffdio_zeropage op{};
    return place(fd_.get(), UFFDIO_ZEROPAGE, dst, length, op, &uffdio_zeropage::zeropage, nullptr);
}

Status Userfault::wake(uint8_t* dst, uint64_t length) {
    uffdio_range r{reinterpret_cast<uint64_t>(dst), length};
    if (::ioctl(fd_.get(), UFFDIO_WAKE, &r) < 0) return Error::from_errno("waking threads waiting on a page (UFFDIO_WAKE)");
    return {};
}

Result<std::vector<Userfault::Fault>> Userfault::read_faults() {
    std::vector<Fault> out;
    uffd_msg msgs[16];
    for (;;) {
        ssize_t n = ::read(fd_.get(), msgs, sizeof msgs);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return out;
        if (n < 0) return Error::from_errno("reading userfaultfd events");
        for (size_t i = 0; i < static_cast<size_t>(n) / sizeof(uffd_msg); ++i) {
            if (msgs[i].event != UFFD_EVENT_PAGEFAULT) continue;  // no other event was asked for
            out.push_back({msgs[i].arg.pagefault.address & ~(kPage - 1), msgs[i].arg.pagefault.feat.ptid});
        }
        if (static_cast<size_t>(n) < sizeof msgs) return out;
    }
}

Result<std::unique_ptr<Userfault>> userfault_over(const memory::GuestMemory& mem, std::vector<uint8_t*>& hosts) {
    auto uffd = Userfault::open();
    if (!uffd) return uffd.error();
    auto u = std::make_unique<Userfault>(std::move(*uffd));
    hosts.clear();
    for (const auto& b : mem.blocks()) {
        hosts.push_back(b->host());
        if (auto s = u->register_range(b->host(), b->size()); !s) return s.error();
    }
    return u;
}

}  // namespace vmm::migration

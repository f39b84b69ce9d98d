#include "memlock.h"

#include <fmt/format.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "vmm/common/units.h"
#include "wire.h"

namespace rdma_migrate {

namespace {

// CAP_IPC_LOCK in the effective set (capget(2) directly: no libcap for one bit).
bool may_lock_without_limit() {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
    if (::syscall(SYS_capget, &header, data) != 0) return false;
    return (data[CAP_IPC_LOCK / 32].effective >> (CAP_IPC_LOCK % 32)) & 1u;
}

}  // namespace

MemlockBudget memlock_budget() {
    rlimit rl{};
    if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || may_lock_without_limit()) return {};
    return {false, static_cast<uint64_t>(rl.rlim_cur)};
}

uint64_t memlock_need(uint64_t ram, bool pin_all, uint64_t pin_limit) {
    // Each chunk is registered at most once per side and kept, or, under a pin limit, older
    // ones are released before a new one is registered over the limit.
    uint64_t registered = pin_all || pin_limit == 0 ? ram : std::min(pin_limit, ram);
    return 3 * kControlBufferSize + registered;
}

Status check_source_memlock(const MemlockBudget& b, uint64_t ram, bool pin_all, uint64_t pin_limit) {
    uint64_t need = memlock_need(ram, pin_all, pin_limit);
    if (b.unlimited || need <= b.limit) return {};
    return vmm::Error(fmt::format("locked-memory limit is {}, {} needs {}: raise it with ulimit -l or set rdma-pin-limit",
                                  vmm::format_size(b.limit), pin_all ? "rdma-pin-all" : "dynamic registration",
                                  vmm::format_size(need)));
}

std::string pin_all_refusal(const MemlockBudget& b, uint64_t ram) {
    uint64_t need = memlock_need(ram, true, 0);
    if (b.unlimited || need <= b.limit) return {};
    return fmt::format("rdma-pin-all not granted: the locked-memory limit is {} and pinning all RAM needs {} "
                       "(raise it with ulimit -l to allow it)",
                       vmm::format_size(b.limit), vmm::format_size(need));
}

}  // namespace rdma_migrate

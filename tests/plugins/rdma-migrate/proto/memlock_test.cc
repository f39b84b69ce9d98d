// The locked-memory budget: what each mode needs, the source's refusal, the destination's
// reason for not granting rdma-pin-all, and how the budget is read (limit and CAP_IPC_LOCK).
#include "proto/memlock.h"

#include <gtest/gtest.h>

#include "vmm/common/units.h"
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/wire.h"

namespace rdma_migrate {

namespace {
using vmm::MiB;
constexpr uint64_t kControl = 3 * kControlBufferSize;
}  // namespace

TEST(Memlock, NeedFollowsTheMode) {
    EXPECT_EQ(memlock_need(128 * MiB, true, 0), kControl + 128 * MiB);
    EXPECT_EQ(memlock_need(128 * MiB, true, 4 * MiB), kControl + 128 * MiB) << "pin-all pins all RAM whatever the limit";
    EXPECT_EQ(memlock_need(128 * MiB, false, 4 * MiB), kControl + 4 * MiB);
    EXPECT_EQ(memlock_need(128 * MiB, false, 256 * MiB), kControl + 128 * MiB) << "never more than RAM";
    EXPECT_EQ(memlock_need(128 * MiB, false, 0), kControl + 128 * MiB) << "a source turned down for pin-all needs no more";
}

TEST(Memlock, SourceRefusesAShortBudgetWithTheWayOut) {
    EXPECT_TRUE(check_source_memlock({}, 1ull << 40, true, 0)) << "unlimited covers anything";
    MemlockBudget b{false, 64 * MiB};
    EXPECT_TRUE(check_source_memlock(b, 128 * MiB, false, 16 * MiB));
    EXPECT_TRUE(check_source_memlock({false, kControl + 128 * MiB}, 128 * MiB, true, 0));
    auto s = check_source_memlock(b, 128 * MiB, true, 0);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().message(),
              "locked-memory limit is 64 MiB, rdma-pin-all needs 129.5 MiB: raise it with ulimit -l or set rdma-pin-limit");
    EXPECT_NE(check_source_memlock(b, 128 * MiB, false, 0).error().message().find("dynamic registration needs"),
              std::string::npos);
}

TEST(Memlock, DestinationGrantsPinAllOnlyWhenAllRamFits) {
    EXPECT_EQ(pin_all_refusal({}, 1ull << 40), "");
    EXPECT_EQ(pin_all_refusal({false, kControl + 128 * MiB}, 128 * MiB), "");
    EXPECT_EQ(pin_all_refusal({false, 64 * MiB}, 128 * MiB),
              "rdma-pin-all not granted: the locked-memory limit is 64 MiB and pinning all RAM needs 129.5 MiB "
              "(raise it with ulimit -l to allow it)");
}

TEST(Memlock, BudgetIsTheLimitUnlessTheProcessMayLockWithoutOne) {
    // In a child: lower the limit, then drop CAP_IPC_LOCK (root has it); exit 0 when the
    // budget read at each step is what it must be.
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        rlimit rl{2 * MiB, 2 * MiB};
        if (::setrlimit(RLIMIT_MEMLOCK, &rl) != 0) ::_exit(10);
        __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3]{};
        if (::syscall(SYS_capget, &h, d) != 0) ::_exit(11);
        bool had = (d[0].effective >> CAP_IPC_LOCK) & 1u;
        MemlockBudget before = memlock_budget();
        if (before.unlimited != had || (!had && before.limit != 2 * MiB)) ::_exit(12);
        d[0].effective &= ~(1u << CAP_IPC_LOCK);
        if (::syscall(SYS_capset, &h, d) != 0) ::_exit(13);
        MemlockBudget after = memlock_budget();
        ::_exit(!after.unlimited && after.limit == 2 * MiB ? 0 : 14);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "10/11/13: a system call failed; 12: the budget before dropping "
                                         "CAP_IPC_LOCK; 14: after";
}

}  // namespace rdma_migrate

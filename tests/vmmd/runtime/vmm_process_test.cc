#include "vmmd/runtime/vmm_process.h"

#include <gtest/gtest.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace vmmd {
namespace {

class VmmProcessTest : public ::testing::Test {
protected:
    std::string dir_ = "/tmp/vmmd-process-" + std::to_string(::getpid());
    void SetUp() override { std::filesystem::create_directories(dir_); }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::string log() const { return dir_ + "/log"; }
    std::string read_log() const {
        std::ifstream f(log());
        std::stringstream s;
        s << f.rdbuf();
        return s.str();
    }
    static bool wait_end(const VmmProcess& p) {
        pollfd fd{p.pidfd(), POLLIN, 0};
        return ::poll(&fd, 1, 10000) == 1;
    }
};

TEST_F(VmmProcessTest, TheExitStatusAndTheOutputAreKept) {
    auto p = VmmProcess::spawn({"/bin/sh", "-c", "echo to-the-log; echo err >&2; exit 3"}, log(), std::nullopt);
    ASSERT_TRUE(p) << p.error().message();
    ASSERT_TRUE(wait_end(**p));
    EXPECT_TRUE((*p)->ended());
    ProcessEnding e = (*p)->reap();
    EXPECT_EQ(e.kind, ProcessEnding::Kind::exited);
    EXPECT_EQ(e.value, 3);
    EXPECT_EQ(read_log(), "to-the-log\nerr\n");
}

TEST_F(VmmProcessTest, ItRunsInASessionOfItsOwnWithTheMemlockLimitAsked) {
    struct rlimit now {};
    ::getrlimit(RLIMIT_MEMLOCK, &now);
    uint64_t ask = now.rlim_max == RLIM_INFINITY ? 8 << 20 : std::min<uint64_t>(now.rlim_max, 8 << 20);
    auto p = VmmProcess::spawn({"/bin/sh", "-c", "ps -o sid= -p $$; ulimit -l; sed -n 's/^CapEff:[[:space:]]*//p' /proc/$$/status"},
                               log(), ask);
    ASSERT_TRUE(p) << p.error().message();
    ASSERT_TRUE(wait_end(**p));
    (*p)->reap();
    std::istringstream out(read_log());
    long sid = 0;
    uint64_t kib = 0;
    std::string cap_eff;
    out >> sid >> kib >> cap_eff;
    EXPECT_EQ(sid, (*p)->identity().pid) << read_log();
    EXPECT_EQ(kib * 1024, ask) << read_log();
    // Root's CAP_IPC_LOCK would lock past the limit: a child with a limit has it no more.
    uint64_t caps = std::stoull(cap_eff, nullptr, 16);
    EXPECT_EQ(caps & (1ull << CAP_IPC_LOCK), 0u) << "CapEff " << cap_eff;
    if (::geteuid() == 0) {
        EXPECT_NE(caps & (1ull << CAP_SYS_ADMIN), 0u) << "only CAP_IPC_LOCK is dropped: CapEff " << cap_eff;
    }
}

TEST_F(VmmProcessTest, AProgramThatCannotRunIsAnErrorWithExecsReason) {
    auto p = VmmProcess::spawn({dir_ + "/no-such-vmm"}, log(), std::nullopt);
    ASSERT_FALSE(p);
    EXPECT_NE(p.error().message().find("No such file or directory"), std::string::npos) << p.error().message();
}

TEST_F(VmmProcessTest, ASignalEndsItAndIsReported) {
    auto p = VmmProcess::spawn({"/bin/sleep", "60"}, log(), std::nullopt);
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_FALSE((*p)->ended());
    ASSERT_TRUE((*p)->signal(SIGKILL));
    ASSERT_TRUE(wait_end(**p));
    ProcessEnding e = (*p)->reap();
    EXPECT_EQ(e.kind, ProcessEnding::Kind::killed);
    EXPECT_EQ(e.value, SIGKILL);
}

TEST_F(VmmProcessTest, AdoptionChecksTheStartTime) {
    auto p = VmmProcess::spawn({"/bin/sleep", "60"}, log(), std::nullopt);
    ASSERT_TRUE(p) << p.error().message();
    ProcessIdentity id = (*p)->identity();
    ASSERT_NE(id.start_ticks, 0u);
    auto same = VmmProcess::adopt(id);
    ASSERT_TRUE(same) << same.error().message();
    EXPECT_EQ((*same)->identity(), id);
    auto other = VmmProcess::adopt({id.pid, id.start_ticks + 1});
    ASSERT_FALSE(other);
    EXPECT_NE(other.error().message().find("is another process now"), std::string::npos) << other.error().message();
    ASSERT_TRUE((*p)->signal(SIGKILL));
    ASSERT_TRUE(wait_end(**p));
    (*p)->reap();
    auto gone = VmmProcess::adopt(id);
    EXPECT_FALSE(gone) << "a process that has ended";
}

TEST(ProcessStartTicks, ReadsProcEvenThoughItsSizeIsZero) {
    auto t = process_start_ticks(::getpid());
    ASSERT_TRUE(t) << t.error().message();
    EXPECT_GT(*t, 0u);
    EXPECT_FALSE(process_start_ticks(0x3fffffff));
}

}  // namespace
}  // namespace vmmd

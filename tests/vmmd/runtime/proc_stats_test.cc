// What /proc's texts become (vmmd/runtime/proc_stats.h): the figures virsh's node and domain
// statistics show, from fixed texts, and the live readers against this test's own process.
#include "vmmd/runtime/proc_stats.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace vmmd {
namespace {

constexpr long kTicks = 100;  // USER_HZ: 10 ms a tick

TEST(ProcStats, CpuTimesOfAllCpusAndOfOne) {
    const char* stat =
        "cpu  100 20 30 400 5 6 7 0 0 0\n"
        "cpu0 60 10 20 200 3 4 5 0 0 0\n"
        "cpu1 40 10 10 200 2 2 2 0 0 0\n"
        "intr 12345\n";
    auto all = parse_cpu_times(stat, -1, kTicks);
    ASSERT_TRUE(all);
    EXPECT_EQ(all->user_ns, 120 * 10'000'000ull);   // user + nice
    EXPECT_EQ(all->kernel_ns, 43 * 10'000'000ull);  // system + irq + softirq
    EXPECT_EQ(all->idle_ns, 400 * 10'000'000ull);
    EXPECT_EQ(all->iowait_ns, 5 * 10'000'000ull);
    auto one = parse_cpu_times(stat, 1, kTicks);
    ASSERT_TRUE(one);
    EXPECT_EQ(one->user_ns, 50 * 10'000'000ull);
    EXPECT_FALSE(parse_cpu_times(stat, 2, kTicks));  // no such CPU
    EXPECT_FALSE(parse_cpu_times("cpu 1 2\n", -1, kTicks));  // too short a line
}

TEST(ProcStats, MeminfoInKib) {
    auto m = parse_meminfo("MemTotal:       24000000 kB\nMemFree:  1000 kB\nHugePages_Total:       0\nbroken line\n");
    EXPECT_EQ(m["MemTotal"], 24000000u);
    EXPECT_EQ(m["MemFree"], 1000u);
    EXPECT_EQ(m["HugePages_Total"], 0u);
    EXPECT_EQ(m.count("broken line"), 0u);
}

TEST(ProcStats, TaskStatWithSpacesAndParenthesesInItsName) {
    // Fields 3 to 39: state, then 35 numbers; utime 14 = 250, stime 15 = 50, processor 39 = 1.
    std::string rest = "S";
    for (int field = 4; field <= 39; ++field) {
        int v = field == 14 ? 250 : field == 15 ? 50 : field == 39 ? 1 : 0;
        rest += " " + std::to_string(v);
    }
    auto t = parse_task_stat("4242 (vcpu (0) x) " + rest + " 0 0\n", kTicks);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->comm, "vcpu (0) x");
    EXPECT_EQ(t->state, 'S');
    EXPECT_EQ(t->user_ns, 2'500'000'000ull);
    EXPECT_EQ(t->system_ns, 500'000'000ull);
    EXPECT_EQ(t->processor, 1);
    EXPECT_FALSE(parse_task_stat("4242 vcpu0 S 1 2", kTicks));  // no parentheses
    EXPECT_FALSE(parse_task_stat("4242 (vcpu0) S 1 2", kTicks));  // too few fields
    EXPECT_FALSE(parse_task_stat("4242 (x) SS " + rest.substr(2), kTicks));  // a state of two letters
}

TEST(ProcStats, StatusKib) {
    const char* status = "Name:\tvmm\nVmRSSX:\t1 kB\nVmRSS:\t  12345 kB\nThreads:\t5\n";
    EXPECT_EQ(parse_status_kib(status, "VmRSS"), 12345u);
    EXPECT_FALSE(parse_status_kib(status, "VmSwap"));
}

TEST(ProcStats, CpuLists) {
    EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
    EXPECT_EQ(parse_cpu_list("0"), (std::vector<int>{0}));
    EXPECT_FALSE(parse_cpu_list("3-1"));
    EXPECT_FALSE(parse_cpu_list("0-99999999"));  // a range no host has: refused, not walked
    EXPECT_FALSE(parse_cpu_list("a"));
}

TEST(ProcStats, ReadsThisProcessAndFindsItsVcpuNamedThreads) {
    auto self = read_task(::getpid());
    ASSERT_TRUE(self);
    EXPECT_GE(self->processor, 0);
    std::atomic<bool> stop{false}, named{false};
    std::thread t([&] {
        ::pthread_setname_np(::pthread_self(), "vcpu3");
        named = true;
        while (!stop) std::this_thread::yield();
    });
    while (!named) std::this_thread::yield();
    auto vcpus = read_vcpu_threads(::getpid());
    stop = true;
    t.join();
    ASSERT_EQ(vcpus.size(), 1u);
    EXPECT_EQ(vcpus[0].index, 3);
    EXPECT_FALSE(vcpus[0].affinity.empty());
}

}  // namespace
}  // namespace vmmd

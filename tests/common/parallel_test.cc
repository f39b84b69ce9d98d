#include "vmm/common/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "tests/support/wait.h"

namespace vmm {
namespace {

TEST(ForEachParallel, EveryPieceRunsOnceOnTheWorkersAsked) {
    std::vector<std::atomic<int>> runs(1000);
    std::mutex mutex;
    std::set<std::thread::id> threads;
    std::set<unsigned> workers;
    // The other workers hold their first piece until the caller has run one, so that it must
    // take a piece however the threads are scheduled (on a busy machine they could otherwise
    // run all 1000 before the caller gets to its first).
    const std::thread::id caller = std::this_thread::get_id();
    std::atomic<bool> caller_ran{false};
    Status s = for_each_parallel(runs.size(), 3, [&](size_t i, unsigned w) {
        if (std::this_thread::get_id() == caller) caller_ran = true;
        else if (!vmm::test::eventually([&] { return caller_ran.load(); }, 30)) return Status(Error("the caller took no piece"));
        ++runs[i];
        std::lock_guard lock(mutex);
        threads.insert(std::this_thread::get_id());
        workers.insert(w);
        return Status{};
    });
    ASSERT_TRUE(s) << s.error().message();
    for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
    EXPECT_LE(threads.size(), 3u);
    for (unsigned w : workers) EXPECT_LT(w, 3u);
    EXPECT_TRUE(threads.contains(std::this_thread::get_id()));  // the caller works too
}

TEST(ForEachParallel, TheLowestFailedPieceIsTheOneReportedAndNoNewPieceStartsAfterIt) {
    std::atomic<size_t> started{0};
    Status s = for_each_parallel(100000, 4, [&](size_t i, unsigned) -> Status {
        ++started;
        if (i == 7 || i == 9) return Error("piece " + std::to_string(i));
        return {};
    });
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().message(), "piece 7");
    EXPECT_LT(started.load(), 100000u);
}

TEST(ForEachParallel, AThrowingPieceIsAFailureNotACrash) {
    Status s = for_each_parallel(10, 2, [](size_t i, unsigned) -> Status {
        if (i == 3) throw std::runtime_error("boom");
        return {};
    });
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message().find("boom"), std::string::npos);
}

TEST(ForEachParallel, NothingToDoOrOneWorkerRunsOnTheCaller) {
    EXPECT_TRUE(for_each_parallel(0, 4, [](size_t, unsigned) -> Status { return Error("never"); }));
    std::set<std::thread::id> threads;
    EXPECT_TRUE(for_each_parallel(5, 1, [&](size_t, unsigned) {
        threads.insert(std::this_thread::get_id());
        return Status{};
    }));
    EXPECT_EQ(threads, std::set<std::thread::id>{std::this_thread::get_id()});
    EXPECT_GE(worker_count(4), 1u);
    EXPECT_LE(worker_count(4), 4u);
}

}  // namespace
}  // namespace vmm

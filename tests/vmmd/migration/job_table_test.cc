#include "vmmd/migration/job_table.h"

#include <gtest/gtest.h>
#include <libvirt/libvirt.h>

namespace vmmd {
namespace {

constexpr Uuid kDomain{1};

MigrationJob active(int operation) {
    MigrationJob j;
    j.operation = operation;
    j.active = true;
    return j;
}

TEST(JobTable, IterationsAreAnnouncedOnceEachAndOnlyForAnActiveJob) {
    JobTable t;
    EXPECT_FALSE(t.iterations_reached(kDomain, 2)) << "no job";
    t.set(kDomain, active(VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT));
    auto first = t.iterations_reached(kDomain, 3);
    ASSERT_TRUE(first);
    EXPECT_EQ(*first, (std::pair<uint64_t, uint64_t>{1, 3}));
    EXPECT_FALSE(t.iterations_reached(kDomain, 3));
    auto next = t.iterations_reached(kDomain, 5);
    ASSERT_TRUE(next);
    EXPECT_EQ(*next, (std::pair<uint64_t, uint64_t>{4, 5}));
}

TEST(JobTable, ACompletedJobIsAnnouncedOnceAndItsStatisticsReadOnceUnlessKept) {
    JobTable t;
    t.set(kDomain, active(VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN));
    JobStats s;
    s.memory_total = 4096;
    EXPECT_TRUE(t.complete(kDomain, s));
    EXPECT_FALSE(t.complete(kDomain, s)) << "a postcopy's end is seen twice: announced once";
    EXPECT_FALSE(t.get(kDomain).active);
    auto kept = t.completed(kDomain, true);
    ASSERT_TRUE(kept);
    EXPECT_EQ(kept->memory_total, 4096u);
    EXPECT_TRUE(t.completed(kDomain, false));
    EXPECT_FALSE(t.completed(kDomain, false)) << "read without KEEP_COMPLETED: forgotten";
    EXPECT_EQ(t.get(Uuid{2}).operation, 0) << "another domain has no job";
}

}  // namespace
}  // namespace vmmd

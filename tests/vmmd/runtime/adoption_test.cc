#include "vmmd/runtime/adoption.h"

#include <gtest/gtest.h>
#include <libvirt/libvirt.h>

namespace vmmd {
namespace {

using Action = Adoption::Action;
constexpr DomainState kRunning{VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_BOOTED};
constexpr DomainState kIncoming{VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_MIGRATION};

// The cases of issue 44: a crash of either vmmd at each step of a migration, and what the vmm
// says when the restarted one reaches it.
TEST(Adoption, AnIncomingMigrationFinishNeverResumedIsEndedWhateverItsVmmReceived) {
    for (const char* migration : {"active", "completed", "failed", ""}) {
        for (const char* run : {"inmigrate", "paused"}) {
            Adoption a = decide_adoption(MigrationPhase::incoming, kIncoming, {run, migration});
            EXPECT_EQ(a.action, Action::end_incoming) << run << " " << migration;
            EXPECT_NE(a.why.find("source keeps the guest"), std::string::npos) << a.why;
        }
    }
}

TEST(Adoption, AnIncomingMigrationFinishResumedRunsOnHere) {
    Adoption a = decide_adoption(MigrationPhase::incoming, kIncoming, {"running", "completed"});
    EXPECT_EQ(a.action, Action::keep);
    EXPECT_EQ(a.state, (DomainState{VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_MIGRATED}));
    EXPECT_EQ(a.phase, MigrationPhase::none);
}

TEST(Adoption, ASourceWhosePerformNeverAnsweredResumesWhenItsMigrationCompleted) {
    Adoption a = decide_adoption(MigrationPhase::outgoing, kRunning, {"postmigrate", "completed"});
    EXPECT_EQ(a.action, Action::resume_source);
    EXPECT_EQ(a.state, (DomainState{VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_MIGRATION_CANCELED}));
}

TEST(Adoption, ASourceWhosePerformAnsweredIsHeldPausedNeverResumed) {
    Adoption a = decide_adoption(MigrationPhase::outgoing_done, kIncoming, {"postmigrate", "completed"});
    EXPECT_EQ(a.action, Action::hold);
    EXPECT_EQ(a.state, (DomainState{VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_MIGRATION}));
    EXPECT_EQ(a.phase, MigrationPhase::outgoing_done);
    // A completed source with no phase recorded (a migration driven on the vmm's own monitor) is
    // held too: nothing says where the guest went.
    EXPECT_EQ(decide_adoption(MigrationPhase::none, kRunning, {"postmigrate", "completed"}).action, Action::hold);
}

TEST(Adoption, AnOutgoingMigrationNobodyWaitsForIsCancelledAndAFailedOneRunsOn) {
    for (const char* migration : {"setup", "active", "device"})
        EXPECT_EQ(decide_adoption(MigrationPhase::outgoing, kRunning, {"running", migration}).action, Action::cancel_outgoing) << migration;
    Adoption failed = decide_adoption(MigrationPhase::outgoing, kRunning, {"running", "failed"});
    EXPECT_EQ(failed.action, Action::keep);
    EXPECT_EQ(failed.state, kRunning);
}

TEST(Adoption, APostcopySplitKeepsBothCopiesAndTheSourcePaused) {
    Adoption dst = decide_adoption(MigrationPhase::incoming, kIncoming, {"running", "postcopy-paused"});
    EXPECT_EQ(dst.action, Action::keep);
    EXPECT_EQ(dst.state, (DomainState{VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_POSTCOPY_FAILED}));
    for (MigrationPhase p : {MigrationPhase::outgoing, MigrationPhase::outgoing_done}) {
        Adoption src = decide_adoption(p, kRunning, {"postmigrate", "postcopy-active"});
        EXPECT_EQ(src.action, Action::keep);
        EXPECT_EQ(src.state.state, VIR_DOMAIN_PAUSED);
    }
}

TEST(Adoption, AVmmOutsideAnyMigrationIsShownAsItRuns) {
    EXPECT_EQ(decide_adoption(MigrationPhase::none, kRunning, {"running", ""}).state, kRunning);
    EXPECT_EQ(decide_adoption(MigrationPhase::none, kRunning, {"paused", ""}).state,
              (DomainState{VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_UNKNOWN}));
    EXPECT_EQ(decide_adoption(MigrationPhase::none, kIncoming, {"running", ""}).state,
              (DomainState{VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_UNKNOWN}));
}

}  // namespace
}  // namespace vmmd

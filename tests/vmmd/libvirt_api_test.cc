// libvirt's C API (libvirt-dev, the library Nova and oVirt call) against two vmmd on this host:
// virDomainMigrate3 moves a guest and virDomainGetJobStats reports the job under libvirt's
// typed-parameter names, during the migration and after it on both sides; virDomainAbortJob
// leaves the source running and nothing on the destination; virDomainMigrateToURI3 with
// VIR_MIGRATE_PEER2PEER lets the source's vmmd drive the destination's. Label libvirt.
#include <gtest/gtest.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "tests/support/require.h"
#include "tests/support/kvm_fixture.h"
#include "tests/support/process.h"
#include "tests/support/vm_pair.h"
#include "tests/support/wait.h"
#include "vmmd/peer/libvirt_handles.h"

namespace vmm::test {
namespace {

namespace peer = vmmd::peer;

using peer::Connection;
using peer::Domain;

// A typed-parameter list with lookups by name.
struct Params : peer::TypedParams {
    std::optional<unsigned long long> ull(const char* name) const {
        unsigned long long v = 0;
        return virTypedParamsGetULLong(list, count, name, &v) == 1 ? std::optional(v) : std::nullopt;
    }
    std::optional<int> i32(const char* name) const {
        int v = 0;
        return virTypedParamsGetInt(list, count, name, &v) == 1 ? std::optional(v) : std::nullopt;
    }
};

std::string last_error() {
    const char* m = virGetLastErrorMessage();
    return m != nullptr ? m : "no error recorded";
}

struct JobStats {
    int type = -1;
    Params params;
};

std::unique_ptr<JobStats> job_stats(virDomainPtr d, unsigned flags) {
    auto s = std::make_unique<JobStats>();
    if (virDomainGetJobStats(d, &s->type, &s->params.list, &s->params.count, flags) != 0) return nullptr;
    return s;
}

constexpr const char* kDomainXml = R"(<domain type='vmm'>
  <name>api</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type>hvm</type><kernel>pattern</kernel></os>
</domain>)";

class TwoVmmd : public ::testing::Test {
protected:
    void SetUp() override {
        VMM_REQUIRE(need::kvm());
        char tmpl[] = "/tmp/vmmd-api.XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        virSetErrorFunc(nullptr, [](void*, virErrorPtr) {});  // the test reports errors itself
        tcp_port_ = free_tcp_port();  // the kernel's choice: no range to share with the tests beside this one
        src_ = start("src", false);
        dst_ = start("dst", true);
        ASSERT_TRUE(src_ && dst_);
    }

    void TearDown() override {
        for (virConnectPtr c : {src_.get(), dst_.get()}) {
            if (c == nullptr) continue;
            virDomainPtr* all = nullptr;
            int n = virConnectListAllDomains(c, &all, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
            for (int i = 0; i < n; ++i) {
                virDomainDestroy(all[i]);
                virDomainFree(all[i]);
            }
            free(all);
        }
        src_.reset();
        dst_.reset();
        for (auto& d : daemons_) {
            d->signal(SIGTERM);
            EXPECT_EQ(d->wait(std::chrono::seconds(10)), 0) << "vmmd did not stop cleanly on SIGTERM";
        }
        daemons_.clear();
        if (!dir_.empty()) std::filesystem::remove_all(dir_);
    }

    std::string socket_uri(const std::string& name) const { return "vmm+unix:///system?socket=" + dir_ + "/" + name + "/sock"; }
    std::string tcp_uri() const { return "vmm+tcp://127.0.0.1:" + std::to_string(tcp_port_) + "/system"; }
    std::string next_migrate_uri() { return "tcp://127.0.0.1:" + std::to_string(free_tcp_port()); }

    // A vmmd with its own socket and state directory (and, if `listen_tcp`, plaintext TCP on
    // tcp_port_), and a connection to it once it answers. A TCP port something else on this host
    // holds is traded for the next one, up to three times; any other failure shows vmmd's log.
    Connection start(const std::string& name, bool listen_tcp) {
        std::string vmmd = std::filesystem::path(VMM_TEST_BINARY).parent_path() / "vmmd";
        std::string log = dir_ + "/" + name + ".log";
        std::filesystem::create_directories(dir_ + "/" + name);
        for (int attempt = 0;; ++attempt) {
            std::vector<std::string> argv = {vmmd, "--socket", dir_ + "/" + name + "/sock", "--state-dir", dir_ + "/" + name + "/state"};
            if (listen_tcp) argv.insert(argv.end(), {"--listen-tcp", "127.0.0.1:" + std::to_string(tcp_port_), "--listen-tcp-insecure"});
            // vmmd's default for every migration (ADeadlineFromEachPlaceReachesTheVmm): never reached here.
            if (name == "src") argv.insert(argv.end(), {"--migration-stall-timeout", "600000"});
            std::filesystem::remove(log);
            daemons_.push_back(VmmProcess::spawn_program(argv, log));
            Connection c;
            std::optional<int> exited;
            wait_for([&] {
                if ((c = Connection(virConnectOpen(socket_uri(name).c_str()))) != nullptr) return true;
                return (exited = daemons_.back()->wait(std::chrono::milliseconds(0))).has_value();
            }, std::chrono::seconds(10));
            if (c) return c;
            if (exited) daemons_.pop_back();  // reaped: TearDown has nothing to stop
            std::string text = read_text_file(log);
            if (exited && listen_tcp && attempt < 3 && text.find("Address already in use") != std::string::npos) {
                tcp_port_ = free_tcp_port();
                continue;
            }
            ADD_FAILURE() << name << " vmmd does not answer: " << last_error()
                          << (exited ? "; it exited with status " + std::to_string(*exited) : std::string())
                          << "; its log:\n" << text;
            return c;
        }
    }

    // The domain's RAM digest, through the QMP socket vmmd gave its vmm.
    std::string ramhash(const std::string& side, virDomainPtr d) {
        char uuid[VIR_UUID_STRING_BUFLEN];
        if (virDomainGetUUIDString(d, uuid) != 0) return "no uuid: " + last_error();
        auto q = QmpClient::connect(dir_ + "/" + side + "/state/run/" + uuid + ".qmp");
        if (!q) return "no QMP socket";
        return q->execute("query-ramhash").dump();
    }

    Domain define_and_start(const char* xml = kDomainXml) {
        Domain d(virDomainDefineXML(src_.get(), xml));
        EXPECT_TRUE(d) << last_error();
        if (d) {
            EXPECT_EQ(virDomainCreate(d.get()), 0) << last_error();
        }
        return d;
    }

    std::string dir_;
    int tcp_port_ = 0;
    std::vector<std::unique_ptr<VmmProcess>> daemons_;
    Connection src_, dst_;
};

TEST_F(TwoVmmd, Migrate3MovesTheGuestAndJobStatsSayWhatMoved) {
    Domain d = define_and_start();
    ASSERT_TRUE(d);
    ASSERT_EQ(virDomainSuspend(d.get()), 0) << last_error();  // a paused guest: the digests must match
    std::string before = ramhash("src", d.get());
    Params p;
    std::string uri = next_migrate_uri();
    ASSERT_EQ(virTypedParamsAddString(&p.list, &p.count, &p.max, VIR_MIGRATE_PARAM_URI, uri.c_str()), 0);
    ASSERT_EQ(virTypedParamsAddULLong(&p.list, &p.count, &p.max, VIR_MIGRATE_PARAM_BANDWIDTH, 500), 0);
    Domain arrived(virDomainMigrate3(d.get(), dst_.get(), p.list, static_cast<unsigned>(p.count),
                                     VIR_MIGRATE_LIVE | VIR_MIGRATE_PERSIST_DEST));
    ASSERT_TRUE(arrived) << last_error();
    EXPECT_EQ(ramhash("dst", arrived.get()), before);

    int state = 0, reason = 0;
    ASSERT_EQ(virDomainGetState(d.get(), &state, &reason, 0), 0);
    EXPECT_EQ(state, VIR_DOMAIN_SHUTOFF);
    EXPECT_EQ(reason, VIR_DOMAIN_SHUTOFF_MIGRATED);
    ASSERT_EQ(virDomainGetState(arrived.get(), &state, &reason, 0), 0);
    EXPECT_EQ(state, VIR_DOMAIN_PAUSED) << "a guest paused at the source stays paused";
    EXPECT_EQ(virDomainIsPersistent(arrived.get()), 1);

    for (auto [dom, operation] : {std::pair{d.get(), VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT},
                                  std::pair{arrived.get(), VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN}}) {
        auto s = job_stats(dom, VIR_DOMAIN_JOB_STATS_COMPLETED);
        ASSERT_TRUE(s) << last_error();
        EXPECT_EQ(s->type, VIR_DOMAIN_JOB_COMPLETED);
        EXPECT_EQ(s->params.i32(VIR_DOMAIN_JOB_OPERATION), operation);
        EXPECT_EQ(s->params.ull(VIR_DOMAIN_JOB_MEMORY_TOTAL), 64ull << 20);
        EXPECT_GT(s->params.ull(VIR_DOMAIN_JOB_MEMORY_PROCESSED).value_or(0), 0u);
        EXPECT_EQ(s->params.ull(VIR_DOMAIN_JOB_MEMORY_REMAINING), 0u);
        EXPECT_EQ(s->params.ull(VIR_DOMAIN_JOB_DATA_REMAINING), 0u);
        EXPECT_TRUE(s->params.ull(VIR_DOMAIN_JOB_TIME_ELAPSED));
        EXPECT_TRUE(s->params.ull(VIR_DOMAIN_JOB_DOWNTIME));
        // Every page is either constant or normal: together they are all of RAM.
        auto constant = s->params.ull(VIR_DOMAIN_JOB_MEMORY_CONSTANT), normal = s->params.ull(VIR_DOMAIN_JOB_MEMORY_NORMAL);
        ASSERT_TRUE(constant && normal);
        EXPECT_EQ((*constant + *normal) * 4096, 64ull << 20);
    }
}

// virDomainMigrate, the call without typed parameters that libvirt-python's dom.migrate() makes:
// libvirt's client sends the older steps (DOMAIN_MIGRATE_BEGIN3 … CONFIRM3), and the guest moves
// as with virDomainMigrate3, its RAM the same.
TEST_F(TwoVmmd, TheOlderMigrateCallWithoutParametersMovesTheGuest) {
    Domain d = define_and_start();
    ASSERT_TRUE(d);
    ASSERT_EQ(virDomainSuspend(d.get()), 0) << last_error();
    std::string before = ramhash("src", d.get());
    std::string uri = next_migrate_uri();
    Domain arrived(virDomainMigrate(d.get(), dst_.get(), VIR_MIGRATE_LIVE, nullptr, uri.c_str(), 0));
    ASSERT_TRUE(arrived) << last_error();
    EXPECT_EQ(ramhash("dst", arrived.get()), before);
    int state = 0, reason = 0;
    ASSERT_EQ(virDomainGetState(d.get(), &state, &reason, 0), 0);
    EXPECT_EQ(state, VIR_DOMAIN_SHUTOFF);
    EXPECT_EQ(reason, VIR_DOMAIN_SHUTOFF_MIGRATED);
    ASSERT_EQ(virDomainGetState(arrived.get(), &state, &reason, 0), 0);
    EXPECT_EQ(state, VIR_DOMAIN_PAUSED);
}

TEST_F(TwoVmmd, JobStatsDuringAMigrationAndAbortLeaveTheSourceRunning) {
    Domain d = define_and_start();
    ASSERT_TRUE(d);
    ASSERT_EQ(virDomainMigrateSetMaxSpeed(d.get(), 1, 0), 0) << last_error();  // 1 MiB/s: 64 MiB take a minute
    std::string uri = next_migrate_uri();
    int result = 0;
    std::string error;
    std::thread migration([&] {
        // Its own connections: the migration call holds its connection while the test polls.
        Connection src(virConnectOpen(socket_uri("src").c_str())), dst(virConnectOpen(socket_uri("dst").c_str()));
        Domain mine(src ? virDomainLookupByName(src.get(), "api") : nullptr);
        Params p;
        virTypedParamsAddString(&p.list, &p.count, &p.max, VIR_MIGRATE_PARAM_URI, uri.c_str());
        Domain arrived(mine && dst ? virDomainMigrate3(mine.get(), dst.get(), p.list, static_cast<unsigned>(p.count), VIR_MIGRATE_LIVE)
                                   : nullptr);
        result = arrived ? 1 : -1;
        if (!arrived) error = last_error();
    });
    std::unique_ptr<JobStats> running;
    bool seen = wait_for(
        [&] {
            running = job_stats(d.get(), 0);
            return running && running->type == VIR_DOMAIN_JOB_UNBOUNDED && running->params.ull(VIR_DOMAIN_JOB_MEMORY_PROCESSED).value_or(0) > 0;
        },
        std::chrono::seconds(30));
    if (seen) {
        EXPECT_EQ(running->params.i32(VIR_DOMAIN_JOB_OPERATION), VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT);
        EXPECT_EQ(running->params.ull(VIR_DOMAIN_JOB_MEMORY_TOTAL), 64ull << 20);
        EXPECT_GT(running->params.ull(VIR_DOMAIN_JOB_MEMORY_REMAINING).value_or(0), 0u);
        EXPECT_EQ(virDomainAbortJob(d.get()), 0) << last_error();
    }
    migration.join();
    ASSERT_TRUE(seen) << "no running migration job appeared; the migration ended with: " << error;
    EXPECT_EQ(result, -1) << "the aborted migration succeeded";
    EXPECT_NE(error.find("cancel"), std::string::npos) << error;
    int state = 0, reason = 0;
    ASSERT_EQ(virDomainGetState(d.get(), &state, &reason, 0), 0);
    EXPECT_EQ(state, VIR_DOMAIN_RUNNING);
    EXPECT_TRUE(wait_for([&] { return virConnectNumOfDomains(dst_.get()) == 0; }, std::chrono::seconds(10)))
        << "a domain is left running on the destination";
}

TEST_F(TwoVmmd, PeerToPeerMigrateToUri3) {
    Domain d = define_and_start();
    ASSERT_TRUE(d);
    Params p;
    std::string uri = next_migrate_uri();
    ASSERT_EQ(virTypedParamsAddString(&p.list, &p.count, &p.max, VIR_MIGRATE_PARAM_URI, uri.c_str()), 0);
    ASSERT_EQ(virDomainMigrateToURI3(d.get(), tcp_uri().c_str(), p.list, static_cast<unsigned>(p.count),
                                     VIR_MIGRATE_LIVE | VIR_MIGRATE_PEER2PEER | VIR_MIGRATE_UNDEFINE_SOURCE),
              0)
        << last_error();
    Domain arrived(virDomainLookupByName(dst_.get(), "api"));
    ASSERT_TRUE(arrived) << last_error();
    int state = 0, reason = 0;
    ASSERT_EQ(virDomainGetState(arrived.get(), &state, &reason, 0), 0);
    EXPECT_EQ(state, VIR_DOMAIN_RUNNING);
    EXPECT_EQ(reason, VIR_DOMAIN_RUNNING_MIGRATED);
    EXPECT_EQ(virConnectNumOfDefinedDomains(src_.get()), 0) << "VIR_MIGRATE_UNDEFINE_SOURCE left the definition";
    auto s = job_stats(arrived.get(), VIR_DOMAIN_JOB_STATS_COMPLETED);
    ASSERT_TRUE(s) << last_error();
    EXPECT_EQ(s->params.i32(VIR_DOMAIN_JOB_OPERATION), VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN);
}

// Nova sets parallel.connections; without VIR_MIGRATE_PARALLEL libvirt refuses it rather than
// ignore it, and so does vmmd: the migration fails at once and the guest runs on at the source.
TEST_F(TwoVmmd, ParallelConnectionsWithoutParallelAreRefusedAndTheSourceRunsOn) {
    Domain d = define_and_start();
    ASSERT_TRUE(d);
    Params p;
    std::string uri = next_migrate_uri();
    ASSERT_EQ(virTypedParamsAddString(&p.list, &p.count, &p.max, VIR_MIGRATE_PARAM_URI, uri.c_str()), 0);
    ASSERT_EQ(virTypedParamsAddInt(&p.list, &p.count, &p.max, VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS, 4), 0);
    EXPECT_NE(virDomainMigrateToURI3(d.get(), tcp_uri().c_str(), p.list, static_cast<unsigned>(p.count),
                                     VIR_MIGRATE_LIVE | VIR_MIGRATE_PEER2PEER),
              0);
    EXPECT_NE(last_error().find("Turn parallel migration on to tune it"), std::string::npos) << last_error();
    int state = 0, reason = 0;
    ASSERT_EQ(virDomainGetState(d.get(), &state, &reason, 0), 0);
    EXPECT_EQ(state, VIR_DOMAIN_RUNNING);
}

// When a migration must end, from each place vmmd takes it: vmmd's --migration-stall-timeout,
// the domain's <vmm:migration-deadline> and -strategy (a list of them), and the migration's own
// vmm.* typed parameters over both (cheapest; refused beside throttle). A strategy the migration cannot follow (postcopy without --postcopy) is
// refused by the vmm in one line, the guest running on; the vmm holds what each place said.
TEST_F(TwoVmmd, ADeadlineFromEachPlaceReachesTheVmm) {
    static const char* kXml = R"(<domain type='vmm'>
  <name>api</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type>hvm</type><kernel>pattern</kernel></os>
  <metadata><vmm:vmm xmlns:vmm='https://github.com/vmm/xmlns/domain/1'>
    <vmm:migration-deadline>10m</vmm:migration-deadline>
    <vmm:migration-deadline-strategy>downtime,postcopy</vmm:migration-deadline-strategy>
  </vmm:vmm></metadata>
</domain>)";
    Domain d = define_and_start(kXml);
    ASSERT_TRUE(d);
    Params p;
    std::string uri = next_migrate_uri();
    ASSERT_EQ(virTypedParamsAddString(&p.list, &p.count, &p.max, VIR_MIGRATE_PARAM_URI, uri.c_str()), 0);
    EXPECT_EQ(virDomainMigrate3(d.get(), dst_.get(), p.list, static_cast<unsigned>(p.count), VIR_MIGRATE_LIVE), nullptr);
    EXPECT_NE(last_error().find("x-deadline-strategy postcopy needs postcopy-ram"), std::string::npos) << last_error();
    char uuid[VIR_UUID_STRING_BUFLEN];
    ASSERT_EQ(virDomainGetUUIDString(d.get(), uuid), 0);
    auto q = QmpClient::connect(dir_ + "/src/state/run/" + uuid + ".qmp");
    ASSERT_TRUE(q);
    auto held = q->execute("query-migrate-parameters")["return"];
    EXPECT_EQ(held["x-deadline"], "10m") << held.dump();
    EXPECT_EQ(held["x-deadline-strategy"], "downtime,postcopy") << held.dump();
    EXPECT_EQ(held["x-stall-timeout"], "600000") << held.dump();
    // A list naming a strategy twice (cheapest is downtime and throttle) is refused in one line.
    Params twice;
    ASSERT_EQ(virTypedParamsAddString(&twice.list, &twice.count, &twice.max, VIR_MIGRATE_PARAM_URI, uri.c_str()), 0);
    ASSERT_EQ(virTypedParamsAddString(&twice.list, &twice.count, &twice.max, "vmm.deadline_strategy", "cheapest,throttle"), 0);
    EXPECT_EQ(virDomainMigrate3(d.get(), dst_.get(), twice.list, static_cast<unsigned>(twice.count), VIR_MIGRATE_LIVE), nullptr);
    EXPECT_NE(last_error().find("deadline strategy 'cheapest,throttle': throttle is named twice (cheapest is downtime and "
                                "throttle, the cheaper first)"),
              std::string::npos)
        << last_error();
    // The migration's own parameters over the domain's: it completes.
    ASSERT_EQ(virTypedParamsAddString(&p.list, &p.count, &p.max, "vmm.deadline_strategy", "cheapest"), 0);
    ASSERT_EQ(virTypedParamsAddString(&p.list, &p.count, &p.max, "vmm.deadline", "1h"), 0);
    Domain arrived(virDomainMigrate3(d.get(), dst_.get(), p.list, static_cast<unsigned>(p.count), VIR_MIGRATE_LIVE));
    EXPECT_TRUE(arrived) << last_error();
}

}  // namespace
}  // namespace vmm::test

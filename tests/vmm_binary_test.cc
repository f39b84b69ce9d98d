// The vmm binary (vmm/main.cc) as a user drives it: command line, serial output, both monitors, exit codes.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/support/require.h"
#include "tests/support/kvm_fixture.h"
#include "tests/support/process.h"

namespace vmm::test {

using namespace std::chrono_literals;

namespace {
// The "Dirtied total" column of a block in `info ramblocks`.
uint64_t dirtied_total(const std::string& ramblocks, const std::string& block) {
    std::istringstream in(ramblocks);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(block + " ", 0) != 0) continue;
        return std::stoull(line.substr(line.find_last_of(' ') + 1));
    }
    ADD_FAILURE() << "no block " << block << " in:\n" << ramblocks;
    return 0;
}

// The names of a process's threads (/proc/PID/task/*/comm), sorted.
std::vector<std::string> thread_names(pid_t pid) {
    std::vector<std::string> names;
    std::string dir = "/proc/" + std::to_string(pid) + "/task";
    for (const auto& t : std::filesystem::directory_iterator(dir)) {
        std::string n = read_text_file(t.path().string() + "/comm");
        if (!n.empty() && n.back() == '\n') n.pop_back();
        names.push_back(n);
    }
    std::sort(names.begin(), names.end());
    return names;
}

// "pages dirtied since start: N (dirty log read K times)" of `info dirty-rate`: K.
uint64_t dirty_log_reads(const std::string& text) {
    auto at = text.find("dirty log read ");
    return at == std::string::npos ? 0 : std::strtoull(text.c_str() + at + 15, nullptr, 10);
}

bool wait_for_text(const std::string& path, const std::string& text, std::chrono::milliseconds timeout) {
    return wait_for([&] { return read_text_file(path).find(text) != std::string::npos; }, timeout);
}
}  // namespace

TEST(VmmProcess, StressGuestDrivenFromTheTextMonitor) {
    VMM_REQUIRE(need::kvm());
    std::string sock = temp_path("hmp.sock"), serial = temp_path("serial.log"), log = temp_path("vmm.log");
    auto vmm = VmmProcess::spawn({"--guest", "stress", "-m", "256M", "--smp", "2", "--monitor", "unix:" + sock,
                                  "--serial", "file:" + serial, "--append", "bytes=16M"},
                                 log);
    ASSERT_TRUE(vmm);
    auto mon = connect_hmp(sock);
    ASSERT_TRUE(mon) << read_text_file(log);
    EXPECT_EQ(hmp(*mon, "info status"), "VM status: running\n");
    ASSERT_TRUE(wait_for_text(serial, "stress: pass 1\n", 60s)) << read_text_file(serial);
    uint64_t d1 = dirtied_total(hmp(*mon, "info ramblocks"), "pc.ram");
    EXPECT_TRUE(wait_for([&] { return dirtied_total(hmp(*mon, "info ramblocks"), "pc.ram") > d1; }, 30s))
        << "dirty pages must grow while the guest runs";
    EXPECT_EQ(hmp(*mon, "stop"), "");
    EXPECT_EQ(hmp(*mon, "info status"), "VM status: paused\n");
    uint64_t s1 = dirtied_total(hmp(*mon, "info ramblocks"), "pc.ram");
    // While stopped, the dirty-rate sampler reads the dirty log twice more (the window a running
    // guest would have dirtied pages in; measured by the sampler, not by a guess at a sleep).
    uint64_t reads = dirty_log_reads(hmp(*mon, "info dirty-rate"));
    EXPECT_TRUE(wait_for([&] { return dirty_log_reads(hmp(*mon, "info dirty-rate")) >= reads + 2; }, 30s));
    uint64_t s2 = dirtied_total(hmp(*mon, "info ramblocks"), "pc.ram");
    EXPECT_EQ(s1, s2) << "no page may be dirtied while stopped";
    EXPECT_EQ(hmp(*mon, "cont"), "");
    EXPECT_EQ(hmp(*mon, "info status"), "VM status: running\n");
    EXPECT_NE(hmp(*mon, "info registers").find("CPU#1"), std::string::npos);
    // Every thread says what it is (top -H, perf): the guest's vCPUs apart from vmm's own work.
    auto names = thread_names(vmm->pid());
    for (const char* want : {"vcpu0", "vcpu1", "monitor", "monitor-client", "signals"}) {
        EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << "no thread named " << want;
    }
    EXPECT_NE(hmp(*mon, "info ramhash").find("pc.ram"), std::string::npos);
    EXPECT_NE(hmp(*mon, "info dirty-rate").find("pages/s"), std::string::npos);
    EXPECT_NE(hmp(*mon, "help").find("info ramblocks"), std::string::npos);
    EXPECT_EQ(hmp(*mon, "launch rockets"), "Error: unknown command: 'launch'; type 'help' for the list\n");
    EXPECT_EQ(hmp(*mon, "info status"), "VM status: running\n") << "a bad command must not disturb the VM";
    hmp(*mon, "quit");
    EXPECT_EQ(vmm->wait(30s), std::optional<int>(0)) << read_text_file(log);
    EXPECT_NE(::access(sock.c_str(), F_OK), 0) << "the monitor socket must be removed at exit";
    ::unlink(serial.c_str());
    ::unlink(log.c_str());
}

TEST(VmmProcess, JsonMonitorWithEventsStartingPaused) {
    VMM_REQUIRE(need::kvm());
    std::string qsock = temp_path("qmp.sock"), log = temp_path("vmm-qmp.log");
    auto vmm = VmmProcess::spawn({"--guest", "idle", "-m", "64M", "-S", "--qmp", "unix:" + qsock, "--serial", "none",
                                  "--append", "tick_ms=50"},
                                 log);
    ASSERT_TRUE(vmm);
    auto qmp = QmpClient::connect(qsock);
    ASSERT_TRUE(qmp) << read_text_file(log);
    EXPECT_EQ(qmp->greeting()["QMP"]["version"]["package"], "vmm");
    EXPECT_EQ(qmp->execute("query-status")["return"]["status"], "prelaunch");
    EXPECT_EQ(qmp->execute("query-guest")["return"]["steps"], 0);
    EXPECT_TRUE(qmp->execute("cont").contains("return"));
    EXPECT_TRUE(qmp->wait_event("RESUME", 10s));
    ASSERT_TRUE(wait_for([&] { return qmp->execute("query-guest")["return"]["steps"].get<uint64_t>() >= 2; }, 60s));
    EXPECT_TRUE(qmp->execute("stop").contains("return"));
    EXPECT_TRUE(qmp->wait_event("STOP", 10s));
    Json blocks = qmp->execute("query-ramblocks")["return"];
    ASSERT_EQ(blocks.size(), 1u);
    EXPECT_EQ(blocks[0]["size"], 64u << 20);
    EXPECT_EQ(qmp->execute("query-ramhash")["return"][0]["digest"].get<std::string>().size(), 16u);
    EXPECT_EQ(qmp->execute("launch-rockets")["error"]["class"], "CommandNotFound");
    EXPECT_EQ(qmp->send_raw("{not json")["error"]["desc"], "JSON parse error");
    EXPECT_EQ(qmp->execute("qmp_capabilities")["error"]["class"], "CommandNotFound");
    EXPECT_EQ(qmp->send_raw(R"({"execute":"query-status","id":"x1"})")["id"], "x1");
    EXPECT_TRUE(qmp->execute("quit").contains("return"));
    EXPECT_EQ(vmm->wait(30s), std::optional<int>(0)) << read_text_file(log);
    ::unlink(log.c_str());
}

TEST(VmmProcess, SigtermEndsTheVmCleanly) {
    VMM_REQUIRE(need::kvm());
    std::string log = temp_path("vmm-term.log");
    auto vmm = VmmProcess::spawn({"--guest", "idle", "-m", "64M", "--serial", "none"}, log);
    ASSERT_TRUE(vmm);
    ASSERT_TRUE(wait_for_text(log, "machine 'vmm'", 30s)) << read_text_file(log);
    vmm->signal(SIGTERM);
    EXPECT_EQ(vmm->wait(30s), std::optional<int>(0)) << read_text_file(log);
    EXPECT_NE(read_text_file(log).find("received SIGTERM"), std::string::npos);
    ::unlink(log.c_str());
}

struct BadStart {
    std::vector<std::string> args;
    int code;
    const char* message;
};

TEST(VmmProcess, BadInputIsOneLineAndANonZeroExit) {
    std::string log = temp_path("vmm-bad.log");
    const BadStart cases[] = {
        {{"--config", "/nonexistent.toml"}, 2, "vmm: error: cannot read config file /nonexistent.toml: No such file"},
        {{"--smp", "two"}, 2, "vmm: error: --smp: 'two' is not 1 to 256 vCPUs"},
        {{"--smp", "0"}, 2, "vmm: error: --smp: '0' is not 1 to 256 vCPUs"},
        {{"--incoming", "tcp:1.2.3.4:99999"}, 2, "vmm: error: --incoming: tcp: '1.2.3.4:99999': port must be 1 to 65535"},
        {{"--incoming", "warp:1.2.3.4:5"}, 2, "vmm: error: --incoming: no transport for 'warp:'"},
        {{"--incoming", "1.2.3.4:5"}, 2, "vmm: error: --incoming: '1.2.3.4:5' is not a migration URI"},
        {{"--monitor", "unix:/tmp/m.sock,mode=0066"}, 2, "vmm: error: --monitor: socket mode 0066 would lock out its owner"},
        {{"-m", "lots"}, 2, "vmm: error: -m/--memory: 'lots' is not a size"},
        {{"--guest", "no-such-payload", "-m", "64M"}, 1, "vmm: error: no payload named 'no-such-payload'"},
    };
    for (const auto& c : cases) {
        auto vmm = VmmProcess::spawn(c.args, log);
        ASSERT_TRUE(vmm);
        EXPECT_EQ(vmm->wait(30s), std::optional<int>(c.code)) << c.args[0];
        std::string out = read_text_file(log);
        EXPECT_EQ(out.rfind(c.message, 0), 0u) << out;
        EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    }
    ::unlink(log.c_str());
}

}  // namespace vmm::test

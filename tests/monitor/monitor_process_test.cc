// The monitors of a running vmm against hostile local clients: lines that once killed it
// (a wrong type, deep nesting, a 10 MiB line), socket permissions whatever the umask, and a
// process at its descriptor limit. The vmm must answer each with an error and run on.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/require.h"
#include "tests/support/kvm_fixture.h"
#include "tests/support/process.h"

namespace vmm::test {

using namespace std::chrono_literals;

namespace {

// A connection to the unix socket at `path`. A vmm binds its socket a moment before it listens:
// a refused connection is tried again for up to 10 s.
UniqueFd raw_connect(const std::string& path, bool nonblocking = false) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    UniqueFd fd;
    wait_for([&] {
        fd = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0));
        if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return true;
        fd = UniqueFd();
        return errno != ECONNREFUSED;  // anything else will not change by waiting
    }, 10s);
    return fd;
}

// The next line from fd (without "\n"), or what arrived before the peer closed or went quiet.
std::string read_line(int fd, std::string& buffer, std::chrono::milliseconds timeout = 30s) {
    for (;;) {
        if (size_t nl = buffer.find('\n'); nl != std::string::npos) {
            std::string line = buffer.substr(0, nl);
            buffer.erase(0, nl + 1);
            return line;
        }
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return std::exchange(buffer, {});
        char chunk[4096];
        ssize_t n = ::read(fd, chunk, sizeof(chunk));
        if (n <= 0) return std::exchange(buffer, {});
        buffer.append(chunk, static_cast<size_t>(n));
    }
}

void send_text(int fd, const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
        ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
        if (n <= 0) return;  // the vmm closed the session: what it answered is still to be read
        done += static_cast<size_t>(n);
    }
}

size_t count_of(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

// CPU time (s) the thread named `name` of `pid` has used.
double thread_cpu_seconds(pid_t pid, const std::string& name) {
    for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
        if (read_text_file(t.path().string() + "/comm") != name + "\n") continue;
        std::string stat = read_text_file(t.path().string() + "/stat");
        std::istringstream in(stat.substr(stat.rfind(')') + 2));
        std::string field;
        unsigned long utime = 0, stime = 0;
        for (int i = 3; i <= 15 && in >> field; ++i) {
            if (i == 14) utime = std::stoul(field);
            if (i == 15) stime = std::stoul(field);
        }
        return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
    }
    return -1;
}

struct Vm {
    std::string qmp, hmp, log;
    std::unique_ptr<VmmProcess> process;
};

// A vmm with both monitors; `qmp_options` go after the QMP socket's path (",mode=0660").
std::unique_ptr<Vm> start_vm(const std::string& name, const std::string& qmp_options = "",
                             const std::vector<std::string>& wrapper = {}) {
    auto vm = std::make_unique<Vm>(Vm{temp_path(name + "-qmp.sock"), temp_path(name + "-hmp.sock"), temp_path(name + ".log"), {}});
    ::unlink(vm->qmp.c_str());
    ::unlink(vm->hmp.c_str());
    std::vector<std::string> args{"--guest", "idle", "-m", "32M", "--serial", "none", "--qmp", "unix:" + vm->qmp + qmp_options,
                                  "--monitor", "unix:" + vm->hmp};
    vm->process = VmmProcess::spawn(args, vm->log, wrapper);
    if (!vm->process || !wait_for([&] { return ::access(vm->qmp.c_str(), F_OK) == 0 && ::access(vm->hmp.c_str(), F_OK) == 0; }, 30s)) {
        ADD_FAILURE() << "the vmm did not start:\n" << read_text_file(vm->log);
        return nullptr;
    }
    return vm;
}

// The vmm still answers on a new QMP session.
void expect_alive(Vm& vm) {
    auto qmp = QmpClient::connect(vm.qmp);
    ASSERT_TRUE(qmp) << read_text_file(vm.log);
    EXPECT_EQ(qmp->execute("query-status")["return"]["status"], "running") << read_text_file(vm.log);
}

}  // namespace

TEST(MonitorHostile, QmpLinesThatOnceKilledTheVmGetAnErrorAndTheVmRunsOn) {
    VMM_REQUIRE(need::kvm());
    auto vm = start_vm("hostile-qmp");
    ASSERT_TRUE(vm);
    UniqueFd fd = raw_connect(vm->qmp);
    ASSERT_TRUE(fd);
    std::string buf;
    EXPECT_NE(read_line(fd.get(), buf).find("\"QMP\""), std::string::npos);
    // 1: a wrong type where a command name goes, before negotiation (was: abort, exit 134).
    send_text(fd.get(), "{\"execute\":42}\n");
    EXPECT_NE(read_line(fd.get(), buf).find("\"error\""), std::string::npos);
    send_text(fd.get(), "{\"execute\":\"qmp_capabilities\",\"id\":7}\n");
    EXPECT_EQ(read_line(fd.get(), buf), R"({"id":7,"return":{}})");
    send_text(fd.get(), "{\"execute\":[],\"arguments\":5}\n{\"execute\":\"query-status\",\"arguments\":[1]}\n");
    EXPECT_NE(read_line(fd.get(), buf).find("\"error\""), std::string::npos);
    EXPECT_NE(read_line(fd.get(), buf).find("'arguments' must be an object"), std::string::npos);
    // 2: an "id" nested 100,000 deep (was: SIGSEGV); 1,000 deep is within QEMU's limit.
    send_text(fd.get(), "{\"execute\":\"query-status\",\"id\":" + std::string(30000, '[') + std::string(30000, ']') + "}\n");
    EXPECT_NE(read_line(fd.get(), buf).find("nests deeper than 1024"), std::string::npos);
    send_text(fd.get(), "{\"execute\":\"query-status\",\"id\":" + std::string(1000, '[') + std::string(1000, ']') + "}\n");
    std::string deep = read_line(fd.get(), buf);
    EXPECT_NE(deep.find("\"return\""), std::string::npos) << deep.substr(0, 200);
    // 7: a 10 MiB line: an error answer, then the session closes, and one log line says why.
    std::thread writer([&] { send_text(fd.get(), std::string(10 << 20, 'x') + "\n"); });
    EXPECT_NE(read_line(fd.get(), buf).find("longer than 65536 bytes"), std::string::npos);
    writer.join();
    EXPECT_EQ(read_line(fd.get(), buf, 10s), "") << "the session must close after an over-long line";
    ASSERT_TRUE(wait_for([&] { return read_text_file(vm->log).find("closing a QMP session") != std::string::npos; }, 10s));
    EXPECT_EQ(count_of(read_text_file(vm->log), "closing a QMP session"), 1u) << read_text_file(vm->log);
    expect_alive(*vm);
}

TEST(MonitorHostile, TextMonitorAnswersAnOverLongLineBeforeClosing) {
    VMM_REQUIRE(need::kvm());
    auto vm = start_vm("hostile-hmp");
    ASSERT_TRUE(vm);
    UniqueFd fd = raw_connect(vm->hmp);
    ASSERT_TRUE(fd);
    std::string buf;
    std::thread writer([&] { send_text(fd.get(), std::string(10 << 20, 'y') + "\n"); });
    std::string all;
    for (std::string line = read_line(fd.get(), buf); !line.empty(); line = read_line(fd.get(), buf)) all += line + "\n";
    writer.join();
    EXPECT_NE(all.find("Error: request line longer than 65536 bytes"), std::string::npos) << all;
    ASSERT_TRUE(wait_for([&] { return read_text_file(vm->log).find("closing a text session") != std::string::npos; }, 10s));
    auto mon = connect_hmp(vm->hmp);
    ASSERT_TRUE(mon);
    EXPECT_EQ(hmp(*mon, "migrate_set_capability events \"on"), "Error: unterminated quote\n");
    EXPECT_EQ(hmp(*mon, "info status"), "VM status: running\n");
}

TEST(MonitorHostile, SocketsAreOwnerOnlyWhateverTheUmaskUnlessAModeIsGiven) {
    VMM_REQUIRE(need::kvm());
    mode_t old = ::umask(0);
    auto vm = start_vm("umask", ",mode=0660");
    ::umask(old);
    ASSERT_TRUE(vm);
    struct stat st{};
    ASSERT_EQ(::stat(vm->hmp.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << "a monitor socket under umask 000";
    ASSERT_EQ(::stat(vm->qmp.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0660u) << "--qmp unix:PATH,mode=0660";
    auto qmp = QmpClient::connect(vm->qmp);
    ASSERT_TRUE(qmp);
    EXPECT_EQ(qmp->execute("query-status")["return"]["status"], "running");
}

TEST(MonitorHostile, AtTheDescriptorLimitTheAcceptorWaitsInsteadOfSpinning) {
    VMM_REQUIRE(need::kvm());
    if (::access("/usr/bin/prlimit", X_OK) != 0) GTEST_SKIP() << "needs prlimit (util-linux)";
    auto vm = start_vm("fd-limit", "", {"prlimit", "--nofile=64", "--"});
    ASSERT_TRUE(vm);
    // Sessions until the vmm runs out of descriptors (a full backlog refuses a connect for now).
    std::vector<UniqueFd> clients;
    ASSERT_TRUE(wait_for([&] {
        if (UniqueFd c = raw_connect(vm->qmp, true)) clients.push_back(std::move(c));
        return read_text_file(vm->log).find("cannot accept a client") != std::string::npos;
    }, 30s)) << clients.size() << " clients connected\n" << read_text_file(vm->log);
    double before = thread_cpu_seconds(vm->process->pid(), "monitor");
    auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(2s);  // a window to measure the acceptor's CPU over, not a wait for a condition
    double spent = thread_cpu_seconds(vm->process->pid(), "monitor") - before;
    double window = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(spent, 0.25 * window) << "the acceptor used " << spent << " s of CPU in " << window << " s";
    EXPECT_EQ(count_of(read_text_file(vm->log), "cannot accept a client"), 1u) << "logged once, not per retry";
    clients.resize(20);  // sessions end, descriptors come back, and the backlog is served
    ASSERT_TRUE(wait_for([&] { return read_text_file(vm->log).find("accepting clients again") != std::string::npos; }, 30s))
        << read_text_file(vm->log);
    clients.clear();
    expect_alive(*vm);
}

}  // namespace vmm::test

#include "tests/support/vm_pair.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <thread>

#include "tests/support/kvm_fixture.h"
#include "tests/support/wait.h"

namespace vmm::test {

using namespace std::chrono_literals;

namespace {

// In the nested VM a guest that spins takes the emulated CPU that the vmm processes, SoftRoCE and
// the test itself need. There the pattern guest, which only reads once it has filled its region,
// rests 20 ms after each step of its check unless the test says otherwise (rest_us=...): what it
// proves is unchanged, its rests are not counted as pauses, and the nested tests took 836 s
// instead of 903 (RdmaMigration.PinAll 8.9 s instead of 18.6). A stress guest keeps its pace: its
// writes are what a migration races (10 ms rests after each pass gained nothing there: 837 s).
void rest_pattern_guest_in_nested_vm(std::vector<std::string>& args) {
    if (!nested_tcg()) return;
    auto guest = std::find(args.begin(), args.end(), "--guest");
    if (guest == args.end() || guest + 1 == args.end() || guest[1] != "pattern") return;
    const std::string rest = "rest_us=" + std::to_string(static_cast<int>(pattern_rest_ms() * 1000));
    auto append = std::find(args.begin(), args.end(), "--append");
    if (append == args.end() || append + 1 == args.end()) {
        args.insert(args.end(), {"--append", rest});
    } else if (append[1].find("rest_us=") == std::string::npos) {
        append[1] += std::string(" ") + rest;
    }
}

}  // namespace

double pattern_rest_ms() { return nested_tcg() ? 20 : 0; }

std::unique_ptr<Vm> Vm::start(const std::string& name, std::vector<std::string> args,
                              const std::vector<std::string>& wrapper) {
    auto vm = std::unique_ptr<Vm>(new Vm());
    rest_pattern_guest_in_nested_vm(args);
    vm->sock_ = temp_path(name + ".sock");
    vm->log_ = temp_path(name + ".log");
    args.push_back("--monitor");
    args.push_back("unix:" + vm->sock_);
    args.push_back("--serial");
    args.push_back("none");
    vm->proc_ = VmmProcess::spawn(args, vm->log_, wrapper);
    if (!vm->proc_) {
        ADD_FAILURE() << "cannot start vmm";
        return nullptr;
    }
    // A vmm that cannot start (no usable /dev/kvm, a bad option) says why in its log and ends:
    // show that, not a client's "no such socket" 30 s later.
    std::optional<int> ended;
    wait_for([&] { return ::access(vm->sock_.c_str(), F_OK) == 0 || (ended = vm->proc_->wait(0ms)); }, 30s);
    if (ended) {
        ADD_FAILURE() << name << " (vmm) ended with status " << *ended << " before opening its monitor:\n" << vm->log();
        return nullptr;
    }
    vm->hmp_ = connect_hmp(vm->sock_);
    if (!vm->hmp_) {
        ADD_FAILURE() << name << " log:\n" << vm->log();
        return nullptr;
    }
    return vm;
}

Vm::~Vm() {
    hmp_.reset();
    ::unlink(log_.c_str());
}

std::string Vm::cmd(const std::string& line) {
    if (!hmp_) return "(no monitor)";
    return hmp(*hmp_, line);
}

std::string Vm::log() { return read_text_file(log_); }

std::string Vm::status() {
    std::string s = cmd("info status");
    const std::string prefix = "VM status: ";
    if (s.rfind(prefix, 0) != 0) return s;
    return s.substr(prefix.size(), s.find('\n') - prefix.size());
}

std::string text_field(const std::string& text, const std::string& label) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(label + ": ", 0) == 0) return line.substr(label.size() + 2);
    return "";
}

std::string Vm::migrate_field(const std::string& label) { return text_field(cmd("info migrate"), label); }

std::string Vm::migrate_status() { return migrate_field("Migration status"); }

uint64_t Vm::guest_value(const std::string& label) {
    std::string v = text_field(cmd("info guest"), label);
    return v.empty() ? 0 : std::stoull(v);
}

double ms_field(Vm& vm, const std::string& label) {
    std::string v = vm.migrate_field(label);
    return v.empty() ? -1.0 : std::stod(v);
}

uint16_t free_tcp_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
}

UniqueFd tcp_listener(uint16_t& port) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) < 0 || ::listen(fd.get(), 16) < 0) return UniqueFd();
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    return fd;
}

std::string send_and_read(uint16_t port, const std::vector<uint8_t>& bytes) {
    UniqueFd fd = tcp_connect(port);
    if (!fd) return "(no connection)";
    if (::send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) return "(send)";
    std::string got;
    char buf[4096];
    timeval tv{10, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (ssize_t n; (n = ::recv(fd.get(), buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<size_t>(n));
    return got;
}


UniqueFd tcp_connect(uint16_t port) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) < 0) return UniqueFd();
    return fd;
}

std::string local_uri(const std::string& scheme, uint16_t port) { return scheme + ":127.0.0.1:" + std::to_string(port); }
std::string tcp_uri(uint16_t port) { return local_uri("tcp", port); }

std::unique_ptr<Vm> destination(const std::string& name, const std::string& uri, const std::string& mem,
                                const std::string& smp) {
    return Vm::start(name, {"-m", mem, "--smp", smp, "-S", "--incoming", uri});
}

void expect_handover(Vm& src, Vm& dst) {
    EXPECT_EQ(src.status(), "postmigrate");
    // The destination leaves "inmigrate" once it has the source's go-ahead, which may be an instant
    // after the source says completed (seen in CI: "inmigrate" at once).
    EXPECT_TRUE(eventually([&] { return dst.status() == "paused"; }, 30)) << dst.status();
    std::string h = src.ramhash();
    EXPECT_EQ(h, dst.ramhash()) << "source and destination RAM differ";
    uint64_t steps = dst.guest_value("steps");
    EXPECT_EQ(dst.cmd("cont"), "");
    EXPECT_TRUE(eventually([&] { return dst.guest_value("steps") > steps + 1; }, 60)) << "the guest did not run on";
    EXPECT_EQ(dst.guest_value("errors"), 0u);
}

}  // namespace vmm::test

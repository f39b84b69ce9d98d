// A wire of the test's own whose outage drops packets, as a switch port that goes dark does:
// two SoftRoCE devices on the ends of a veth pair, rxe7a at 10.99.7.1 (the source's side) and
// rxe7b at 10.99.7.2 (the destination's); `cut()` drops every packet both ways, `mend()` lets
// them through again. Made and changed by scripts/lib/scratch-wire.sh, which says how and why a
// netdev taken down will not do. Only where VMM_RDMA_HOTPLUG=1 says the machine's network and
// RDMA devices are the tests' to change (the SoftRoCE nested VM).
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/support/vm_pair.h"
#include "vmm/common/fd.h"

#ifndef VMM_SOURCE_DIR
#error "VMM_SOURCE_DIR (the checkout) must be defined for scratch_wire.h"
#endif

namespace vmm::test {

struct ScratchWire {
    static constexpr const char* kDestination = "10.99.7.2";
    static int wire(const std::string& what) {
        int rc = std::system((std::string(VMM_SOURCE_DIR "/scripts/lib/scratch-wire.sh ") + what).c_str());
        return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    }

    // One wire at a time on the machine: tests that use it may run side by side (ctest -j), and
    // each waits here for the one before to take its wire down.
    static std::string output(const std::string& what) {
        std::string out;
        FILE* f = ::popen((std::string(VMM_SOURCE_DIR "/scripts/lib/scratch-wire.sh ") + what + " 2>&1").c_str(), "r");
        if (f == nullptr) return out;
        char buf[512];
        while (std::fgets(buf, sizeof buf, f) != nullptr) out += buf;
        ::pclose(f);
        return out;
    }

    ScratchWire() : lock_(::open("/run/vmm-scratch-wire.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600)) {
        if (!lock_.valid() || ::flock(lock_.get(), LOCK_EX) != 0) return;
        int rc = wire("up");
        made = rc == 0;
        if (rc == 2) missing = "the veth and sch_netem kernel modules";
    }
    ~ScratchWire() {
        if (lock_.valid()) wire("down");
    }
    static std::string uri() { return std::string("rdma:") + kDestination + ":" + std::to_string(free_tcp_port()); }
    // Packets the source's side has put on the wire so far, and the routes, rules and RDMA ids
    // (for a failure's message: a migration that does not cross the wire is no test of it).
    static uint64_t carried() { return std::strtoull(output("carried").c_str(), nullptr, 10); }
    static std::string explain() { return output("explain"); }
    bool cut() { return wire("cut") == 0; }
    bool mend() { return wire("mend") == 0; }

    bool made = false;
    std::string missing;  // what the machine lacks, when the wire could not be made for that

private:
    UniqueFd lock_;  // flock'ed while this wire exists; released (closed) after it is down
};

}  // namespace vmm::test

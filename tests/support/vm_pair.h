// A vmm process driven through its text monitor, for the migration tests.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/process.h"
#include "tests/support/wait.h"

namespace vmm::test {

class Vm {
public:
    // Starts vmm with `args` plus a text monitor (through `wrapper`, see VmmProcess::spawn); fails
    // the test if the monitor never appears.
    static std::unique_ptr<Vm> start(const std::string& name, std::vector<std::string> args,
                                     const std::vector<std::string>& wrapper = {});
    ~Vm();

    std::string cmd(const std::string& line);
    std::string status();                 // "running", "paused", "postmigrate", ...
    std::string migrate_status();         // "active", "completed", ...
    std::string migrate_field(const std::string& label);  // a line of 'info migrate', after "label: "
    uint64_t guest_value(const std::string& label);       // a number from 'info guest'
    std::string ramhash() { return cmd("info ramhash"); }
    std::string log();
    VmmProcess& process() { return *proc_; }
    void forget_monitor() { hmp_.reset(); }

private:
    std::unique_ptr<VmmProcess> proc_;
    std::unique_ptr<monitor::HmpClient> hmp_;
    std::string sock_, log_;
};

uint16_t free_tcp_port();
// A socket listening on 127.0.0.1 (any free port, written to `port`), and a client of one.
UniqueFd tcp_listener(uint16_t& port);
UniqueFd tcp_connect(uint16_t port);
// Sends `bytes` to 127.0.0.1:port and returns what comes back until the peer closes (10 s at
// most): what a vmm answers a peer that is not its source.
std::string send_and_read(uint16_t port, const std::vector<uint8_t>& bytes);
std::string tcp_uri(uint16_t port);  // tcp:127.0.0.1:PORT
std::string local_uri(const std::string& scheme, uint16_t port);  // SCHEME:127.0.0.1:PORT
// VMM_PLUGIN_DIR for the vmm processes a test starts while this lives (e.g. the loop: plugin's).
// An environment variable set for the test's life (the vmm processes it starts inherit it).
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
    ~ScopedEnv() { ::unsetenv(name_); }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
};
class PluginDir {
public:
    explicit PluginDir(const std::string& dir) { ::setenv("VMM_PLUGIN_DIR", dir.c_str(), 1); }
    ~PluginDir() { ::unsetenv("VMM_PLUGIN_DIR"); }
    PluginDir(const PluginDir&) = delete;
    PluginDir& operator=(const PluginDir&) = delete;
};
// A destination vmm: --incoming URI, paused after the migration (-S) so RAM can be compared.
std::unique_ptr<Vm> destination(const std::string& name, const std::string& uri, const std::string& mem = "256M",
                                const std::string& smp = "2");
// After a completed migration: same memory on both sides, and the guest runs on at the destination.
void expect_handover(Vm& src, Vm& dst);
// The value of the first "label: value" line of a monitor answer; "" if there is none.
std::string text_field(const std::string& text, const std::string& label);
// A duration line of 'info migrate' ("label: 12.5 ms") in ms; -1 when the line is missing.
double ms_field(Vm& vm, const std::string& label);
// The rest (ms) Vm::start gives a pattern guest after each step: 20 in the nested VM, where a
// spinning guest starves everything else, 0 elsewhere.
double pattern_rest_ms();

}  // namespace vmm::test

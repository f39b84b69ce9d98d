// libFuzzer target for both monitors' line handling, through the real command table with a real
// machine under it: a KVM VM running the idle payload, its migration manager, and every command
// vmm registers. VMM_FUZZ_MODE=hmp or qmp fuzzes one monitor (ctest runs each: the text
// monitor's parsing, QMP's dispatch); without it the first byte picks. The input is split into lines,
// each handled as a session would (QMP: a fresh session per input, so negotiation is fuzzed
// too). After every input the machine must still answer `query-status`; an input that ended
// it (`quit`) is allowed to, and the next input gets a new machine. Built by tests/ with clang.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "vmm/machine/machine.h"
#include "vmm/machine/payload.h"
#include "vmm/migration/session/manager.h"
#include "vmm/monitor/client/json_access.h"
#include "vmm/monitor/machine_commands.h"
#include "vmm/monitor/migration_commands.h"
#include "vmm/monitor/qmp_session.h"

using namespace vmm;

namespace {

// What main() builds, minus the sockets: machine, manager, and the command table over both.
struct Vmm {
    monitor::Dispatcher dispatcher;
    std::unique_ptr<machine::Machine> machine;
    std::unique_ptr<migration::MigrationManager> manager;
};

std::unique_ptr<Vmm> make_vmm() {
    auto v = std::make_unique<Vmm>();
    machine::MachineSpec spec;
    spec.ram = {memory::RamBlockSpec{"pc.ram", 0, 4 << 20, memory::HugePages::none}};
    auto m = machine::Machine::create(spec);
    auto payload = machine::resolve_payload("idle");
    if (!m || !payload) std::abort();  // no KVM or no payload: the ctest wrapper skips before this
    v->machine = std::move(*m);
    if (!v->machine->boot(*payload, "tick_ms=50") || !v->machine->run().resume()) std::abort();
    v->manager = std::make_unique<migration::MigrationManager>(*v->machine, [](migration::MigrationStatus) {});
    monitor::add_machine_commands(v->dispatcher.table(), *v->machine);
    monitor::add_migration_commands(v->dispatcher.table(), *v->manager, *v->machine, [](const Error&) {});
    monitor::add_help_command(v->dispatcher.table());
    return v;
}

std::unique_ptr<Vmm>& current() {
    static std::unique_ptr<Vmm> vmm;
    return vmm;
}

void run_hmp(Vmm& v, std::string_view line) {
    auto out = v.dispatcher.run_hmp(line);
    // A foreground `migrate` would show progress until it ends: its client has gone at once.
    if (out.follow) out.follow([](const std::string&) { return false; });
}

}  // namespace

// -1: the first byte of each input picks the monitor; 0: always the text monitor; 1: always QMP.
static int forced_mode = -1;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    if (const char* m = std::getenv("VMM_FUZZ_MODE")) forced_mode = std::string_view(m) == "qmp" ? 1 : 0;
    // No migration the fuzzer starts may reach beyond this machine or wait long for a name.
    ::setenv("RES_OPTIONS", "timeout:1 attempts:1", 1);
    ::setenv("VMM_PLUGIN_DIR", "/nonexistent", 1);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    auto& vmm = current();
    if (!vmm || vmm->machine->run().state() == machine::RunState::shutdown) {
        vmm.reset();
        vmm = make_vmm();
    }
    bool qmp = forced_mode >= 0 ? forced_mode == 1 : (data[0] & 1) != 0;
    std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    monitor::QmpSession session(vmm->dispatcher, [](const std::string&) {});
    while (!rest.empty()) {
        size_t nl = rest.find('\n');
        std::string_view line = rest.substr(0, nl);
        rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
        if (qmp) (void)session.handle(line);
        else run_hmp(*vmm, line);
    }
    // The vmm under the monitor is alive: it still answers, whatever the input did.
    monitor::Json reply = vmm->dispatcher.run_qmp(monitor::Json{{"execute", "query-status"}});
    if (monitor::member(reply, "return") == nullptr) std::abort();
    return 0;
}

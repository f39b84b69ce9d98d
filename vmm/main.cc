#include <unistd.h>
#include "vmm/common/log.h"
#include "vmm/machine/machine.h"
#include "vmm/machine/payload.h"
using namespace vmm;
int main(int argc, char** argv) {
    machine::MachineSpec spec;
    spec.vcpus = argc > 3 ? 1 : 2;
    spec.ram.push_back({"ram0", 0, 64 << 20, memory::HugePages::none});
    spec.serial_sink = devices::stdout_sink();
    spec.dirty_backend = argc > 2 ? memory::DirtyBackend::ring : memory::DirtyBackend::log;
    auto m = machine::Machine::create(spec);
    if (!m) { log::error("{}", m.error().message()); return 1; }
    auto p = machine::resolve_payload(argc > 1 ? argv[1] : "stress");
    if (!p) { log::error("{}", p.error().message()); return 1; }
    if (auto s = (*m)->boot(*p, "bytes=8M"); !s) { log::error("{}", s.error().message()); return 1; }
    (*m)->resume();
    for (int i = 0; i < 5; ++i) {
        sleep(1);
        auto r = (*m)->control().report();
        auto d = (*m)->dirty_rate().rate();
        log::info("progress {} steps {} dirty/s {:.0f} dirty {}", r.progress, r.steps, d.pages_per_second, (*m)->memory().blocks()[0]->dirty().count());
    }
    (*m)->pause();
    auto st = (*m)->save_vcpus();
    if (!st) { log::error("{}", st.error().message()); return 1; }
    log::info("rip {:#x}", (*st)[0].regs.rip);
    return 0;
}

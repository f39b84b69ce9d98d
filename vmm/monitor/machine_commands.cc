#include "vmm/monitor/machine_commands.h"

#include <fmt/format.h>

#include "vmm/common/log.h"
#include "vmm/common/units.h"
#include "vmm/monitor/client/json_access.h"
#include "vmm/memory/digest.h"

namespace vmm::monitor {

namespace {

using machine::Machine;
using machine::RunState;

std::string status_text(const Json& r) { return fmt::format("VM status: {}\n", str(r, "status")); }

std::string ramblocks_text(const Json& r) {
    std::string out = fmt::format("{:<16} {:<18} {:>12} {:>12} {:>14}\n", "Block Name", "Address", "Size",
                                  "Dirty pages", "Dirtied total");
    for (const auto& b : r) {
        out += fmt::format("{:<16} {:#018x} {:>12} {:>12} {:>14}\n", str(b, "name"),
                           u64(b, "address"), format_size(u64(b, "size")),
                           u64(b, "dirty-pages"), u64(b, "dirtied-total"));
    }
    return out;
}

std::string dirty_rate_text(const Json& r) {
    std::string out = fmt::format("dirty pages rate: {:.0f} pages/s ({:.1f} MiB/s) over the last {:.2f} s\n"
                                  "pages dirtied since start: {} (dirty log read {} times)\n",
                                  num(r, "dirty-pages-rate"), num(r, "dirty-rate"),
                                  num(r, "period-ms") / 1000.0, u64(r, "total-dirty-pages"), u64(r, "samples"));
    std::vector<std::string> windows;
    for (const Json& w : child(r, "working-set-windows")) {
        windows.push_back(fmt::format("{:.0f} s {} of {} written", num(w, "window-ms") / 1000,
                                      format_size(u64(w, "distinct-bytes")), format_size(u64(w, "written-bytes"))));
    }
    if (windows.empty()) return out + "working set: no window watched whole yet\n";
    out += fmt::format("working set: {}\n", fmt::join(windows, "; "));
    if (u64(r, "hot-set-bytes") == 0) return out + "hot set: none (new pages in every window)\n";
    return out + fmt::format("hot set: {} (over {:.0f} s)\n", format_size(u64(r, "hot-set-bytes")),
                             num(r, "working-set-window-ms") / 1000);
}

// As QEMU's 'info vcpu_dirty_limit' (its MB is a MiB).
std::string dirty_limit_text(const Json& r) {
    if (r.empty()) return "Dirty page limit not enabled!\n";
    std::string out;
    for (const auto& v : r) {
        out += fmt::format("vcpu[{}], limit rate {} (MB/s), current rate {} (MB/s), throttled {} %\n", u64(v, "cpu-index"),
                           u64(v, "limit-rate"), u64(v, "current-rate"), u64(v, "x-throttle-percent"));
    }
    return out;
}

std::string ramhash_text(const Json& r) {
    std::string out;
    for (const auto& b : r) out += fmt::format("{:<16} {}\n", str(b, "name"), str(b, "digest"));
    return out;
}

std::string guest_text(const Json& r) {
    return fmt::format("progress: {}\nsteps: {}\nresults: {} (last {})\nerrors: {} (last {:#x})\n"
                       "longest pause observed: {:.3f} ms\nlast message: {}\n",
                       u64(r, "progress"), u64(r, "steps"), u64(r, "results"),
                       u64(r, "last-result"), u64(r, "errors"), u64(r, "last-error"),
                       static_cast<double>(u64(r, "max-pause-ns")) / 1e6,
                       str(r, "last-message"));
}

std::string registers_text(const Json& r) {
    std::string out;
    for (const auto& c : r) {
        out += fmt::format("CPU#{}\n", u64(c, "cpu"));
        int col = 0;
        for (const char* name : {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11",
                                 "r12", "r13", "r14", "r15", "rip", "rflags", "cr0", "cr2", "cr3", "cr4", "efer"}) {
            out += fmt::format("{:>6}={:016x}{}", name, u64(c, name), ++col % 4 == 0 ? "\n" : " ");
        }
        out += "\n";
    }
    return out;
}

Json registers_json(uint64_t cpu, const machine::VcpuState& s) {
    const auto& g = s.regs;
    return Json{{"cpu", cpu},        {"rax", g.rax},       {"rbx", g.rbx},       {"rcx", g.rcx},   {"rdx", g.rdx},
                {"rsi", g.rsi},      {"rdi", g.rdi},       {"rbp", g.rbp},       {"rsp", g.rsp},   {"r8", g.r8},
                {"r9", g.r9},        {"r10", g.r10},       {"r11", g.r11},       {"r12", g.r12},   {"r13", g.r13},
                {"r14", g.r14},      {"r15", g.r15},       {"rip", g.rip},       {"rflags", g.rflags},
                {"cr0", s.sregs.cr0}, {"cr2", s.sregs.cr2}, {"cr3", s.sregs.cr3}, {"cr4", s.sregs.cr4},
                {"efer", s.sregs.efer}};
}

Result<Json> query_registers(Machine& m) {
    // vCPU registers can only be read outside KVM_RUN: pause briefly if running.
    bool was_running = m.run().state() == RunState::running;
    if (was_running) m.run().pause();
    auto states = m.save_vcpus();
    if (was_running) {
        if (auto s = m.run().resume(); !s) return s.error();
    }
    if (!states) return states.error();
    Json out = Json::array();
    for (size_t i = 0; i < states->size(); ++i) out.push_back(registers_json(i, (*states)[i]));
    return out;
}

Json ramblocks_json(Machine& m) {
    Json out = Json::array();
    for (const auto& b : m.memory().blocks()) {
        out.push_back({{"name", b->name()}, {"address", b->guest_addr()}, {"size", b->size()}, {"dirty-pages", b->dirty().count()},
                        {"dirtied-total", b->dirtied()}});
    }
    return out;
}

void add_run_control(CommandTable& t, Machine& m) {
    t.add({"info status", "query-status", {}, "show the VM's run state",
           [&m](const Json&) -> Result<Json> {
               auto s = m.run().state();
               return Json{{"status", std::string(machine::to_string(s))}, {"running", s == RunState::running}};
           },
           status_text});
    t.add({"stop", "stop", {}, "pause every vCPU", [&m](const Json&) -> Result<Json> {
               m.run().pause();
               return Json::object();
           }, {}});
    t.add({"cont", "cont", {{"force", ArgType::flag, true, "-f"}},
           "resume every vCPU; -f: even where a postcopy migration left the guest to the destination (forks it)",
           [&m](const Json& a) -> Result<Json> {
               if (auto s = m.run().resume(flag(a, "force")); !s) return s.error();
               return Json::object();
           }, {}});
    t.add({"quit", "quit", {}, "end the VM and exit vmm (status 3 if the guest's state is not whole here)",
           [&m](const Json&) -> Result<Json> {
               std::string why = m.run().incomplete();
               if (!why.empty()) {
                   log::warn("quit: {}: the guest is lost here; vmm exits with status {}", why, Machine::kIncompleteExit);
               }
               m.run().end(why.empty() ? 0 : Machine::kIncompleteExit);
               return Json::object();
           }, {}});
}

}  // namespace

Json working_set_windows_json(const memory::DirtyRate& r) {
    Json windows = Json::array();
    for (const auto& w : r.windows) {
        windows.push_back({{"window-ms", w.seconds * 1000.0}, {"distinct-bytes", w.distinct_pages * memory::kPageSize},
                           {"written-bytes", w.written_pages * memory::kPageSize}});
    }
    return windows;
}

namespace {

void add_inspection(CommandTable& t, Machine& m) {
    t.add({"info ramblocks", "query-ramblocks", {}, "RAM blocks: name, address, size, dirty pages (pending, and dirtied since start)",
           [&m](const Json&) -> Result<Json> {
               if (auto s = m.dirty_rate().sync_now(); !s) return s.error();
               return ramblocks_json(m);
           },
           ramblocks_text});
    t.add({"info dirty-rate", "query-dirty-rate", {}, "how fast the guest dirties memory",
           [&m](const Json&) -> Result<Json> {
               auto r = m.dirty_rate().rate();
               return Json{{"dirty-pages-rate", r.pages_per_second},
                           {"dirty-rate", r.pages_per_second * memory::kPageSize / (1024.0 * 1024.0)},
                           {"period-ms", r.period_seconds * 1000.0},
                           {"total-dirty-pages", r.total_pages},
                           {"samples", r.samples},
                           {"working-set-windows", working_set_windows_json(r)},
                           {"working-set-window-ms", r.working_set_seconds * 1000.0},
                           {"hot-set-bytes", r.hot_set_pages * memory::kPageSize}};
           },
           dirty_rate_text});
    t.add({"info ramhash", "query-ramhash", {}, "a digest (XXH3-64) of each RAM block's contents",
           [&m](const Json&) -> Result<Json> {
               Json out = Json::array();
               for (const auto& b : m.memory().blocks())
                   out.push_back({{"name", b->name()}, {"digest", memory::digest_hex(memory::block_digest(*b))}});
               return out;
           },
           ramhash_text});
    t.add({"info registers", "query-registers", {}, "every vCPU's registers",
           [&m](const Json&) { return query_registers(m); }, registers_text});
    t.add({"info guest", "query-guest", {}, "what the payload reported through the control device",
           [&m](const Json&) -> Result<Json> {
               auto r = m.control().report();
               return Json{{"progress", r.progress}, {"steps", r.steps}, {"results", r.results},
                           {"last-result", r.last_result}, {"errors", r.errors}, {"last-error", r.last_error},
                           {"max-pause-ns", r.max_pause_ns}, {"last-message", r.last_message}};
           },
           guest_text});
}

constexpr uint64_t kPagesPerMiB = (1024 * 1024) / memory::kPageSize;

// The vCPU a command names, if it names one (QMP's cpu-index is a signed int).
Result<std::optional<uint32_t>> cpu_index(const Json& a) {
    const Json* cpu = member(a, "cpu-index");
    if (cpu == nullptr) return std::optional<uint32_t>{};
    auto v = int_member(a, "cpu-index");
    if (!v || *v < 0 || *v > UINT32_MAX) return Error("cpu-index: a vCPU's number, from 0");
    return std::optional<uint32_t>(static_cast<uint32_t>(*v));
}

// QEMU's per-vCPU dirty page rate limit (dirty_limit.h), in MB/s as QEMU has it.
void add_dirty_limits(CommandTable& t, Machine& m) {
    t.add({"set_vcpu_dirty_limit", "set-vcpu-dirty-limit",
           {{"dirty-rate", ArgType::integer}, {"cpu-index", ArgType::integer, true}},
           "limit how fast a vCPU (or every vCPU) dirties memory, MB/s: it is throttled to that (needs the dirty ring)",
           [&m](const Json& a) -> Result<Json> {
               auto cpu = cpu_index(a);
               auto rate = int_member(a, "dirty-rate");
               if (!cpu) return cpu.error();
               if (!rate || *rate <= 0 || static_cast<uint64_t>(*rate) > UINT64_MAX / kPagesPerMiB)
                   return Error("dirty-rate: MB/s, more than 0 (cancel_vcpu_dirty_limit lifts a limit)");
               auto limiter = m.dirty_limiter();
               if (!limiter) return limiter.error();
               if (auto s = (*limiter)->set(*cpu, static_cast<uint64_t>(*rate) * kPagesPerMiB); !s) return s.error();
               return Json::object();
           },
           {}});
    t.add({"cancel_vcpu_dirty_limit", "cancel-vcpu-dirty-limit", {{"cpu-index", ArgType::integer, true}},
           "lift a vCPU's dirty limit (or every vCPU's)",
           [&m](const Json& a) -> Result<Json> {
               auto cpu = cpu_index(a);
               if (!cpu) return cpu.error();
               auto limiter = m.dirty_limiter();
               if (!limiter) return limiter.error();
               if (auto s = (*limiter)->set(*cpu, 0); !s) return s.error();
               return Json::object();
           },
           {}});
    t.add({"info vcpu_dirty_limit", "query-vcpu-dirty-limit", {}, "the vCPUs' dirty limits, their rates and throttles",
           [&m](const Json&) -> Result<Json> {
               auto limiter = m.dirty_limiter();
               if (!limiter) return limiter.error();
               Json out = Json::array();
               for (const auto& r : (*limiter)->rows()) {
                   out.push_back({{"cpu-index", r.cpu}, {"limit-rate", r.limit / kPagesPerMiB},
                                  {"current-rate", static_cast<uint64_t>(r.current / kPagesPerMiB)},
                                  {"x-throttle-percent", r.throttle}});
               }
               return out;
           },
           dirty_limit_text});
}

}  // namespace

void add_machine_commands(CommandTable& table, Machine& machine) {
    add_run_control(table, machine);
    add_inspection(table, machine);
    add_dirty_limits(table, machine);
}

void add_help_command(CommandTable& table) {
    table.add({"help", "query-commands", {}, "list the commands",
               [&table](const Json&) -> Result<Json> {
                   Json out = Json::array();
                   for (const auto& c : table.commands()) out.push_back({{"name", c.qmp}, {"hmp", c.hmp}, {"help", c.help}});
                   return out;
               },
               [&table](const Json&) { return table.help_text(); }});
}

void add_human_monitor_command(CommandTable& table) {
    // Runs under the command lock QMP's caller holds already (Dispatcher::run_qmp), as any command.
    table.add({"", "human-monitor-command", {{"command-line", ArgType::string}}, "run one line of the text monitor",
               [&table](const Json& args) -> Result<Json> { return Json(execute_hmp(table, str(args, "command-line"))); },
               {}});
}

}  // namespace vmm::monitor

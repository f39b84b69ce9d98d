#include "vmm/config/cli.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "vmm/common/units.h"

#ifndef VMM_VERSION
#define VMM_VERSION "0.0.0"
#endif

namespace vmm::config {

namespace {

struct Raw {
    std::string config, name, memory, guest, append, monitor, qmp, serial, dirty, incoming, prefill, smp;
    bool paused = false, version = false, verbose = false, prealloc = false;
};

void define(CLI::App& app, Raw& raw) {
    app.add_option("--config", raw.config, "TOML machine config (see configs/)")->type_name("FILE");
    app.add_option("--name", raw.name, "machine name")->type_name("NAME");
    app.add_option("-m,--memory", raw.memory, "size of the first RAM block, e.g. 256M, 4G")->type_name("SIZE");
    app.add_option("--smp", raw.smp, "number of vCPUs")->type_name("N");
    app.add_option("--guest", raw.guest, "payload: idle, stress, pattern, or a path to an ELF")->type_name("NAME|PATH");
    app.add_option("--append", raw.append, "payload parameters, e.g. \"bytes=64M stride=4096\"")->type_name("PARAMS");
    app.add_option("--prefill", raw.prefill, "fill the first SIZE of RAM with random bytes from the host before boot "
                                             "(benchmarks)")
        ->type_name("SIZE");
    app.add_flag("-S", raw.paused, "start paused (resume with 'cont')");
    app.add_flag("--mem-prealloc", raw.prealloc, "populate all guest RAM at start (an incoming migration then skips page zeroing)");
    app.add_option("--monitor", raw.monitor, "text monitor: stdio, unix:PATH[,mode=0660] or none (sockets are 0600 by default)")->type_name("ENDPOINT");
    app.add_option("--qmp", raw.qmp, "JSON monitor: unix:PATH[,mode=0660] or none")->type_name("ENDPOINT");
    app.add_option("--serial", raw.serial, "guest serial output: stdout, file:PATH or none")->type_name("OUTPUT");
    app.add_option("--dirty-tracking", raw.dirty, "dirty-page tracking: log or ring")->type_name("BACKEND");
    app.add_option("--incoming", raw.incoming,
                   "wait for a live migration: tcp:HOST:PORT, unix:PATH, rdma:HOST:PORT, file:PATH[,offset=N] (restore a saved "
                   "guest), or defer (then migrate_incoming)")
        ->type_name("URI");
    app.add_flag("-v,--verbose", raw.verbose, "log debug messages");
    app.add_flag("--version", raw.version, "print the version and exit");
}

Status apply_memory(const std::string& text, Config& c) {
    auto size = parse_size(text);
    if (!size) return Error("-m/--memory: " + size.error().message());
    if (c.ram.empty()) c.ram = effective_ram(c);
    c.ram.front().size = *size;
    if (auto s = memory::validate_block_spec(c.ram.front()); !s) return Error("-m/--memory: " + s.error().message());
    return {};
}

Status apply(const Raw& raw, Config& c) {
    if (!raw.name.empty()) c.name = raw.name;
    if (!raw.memory.empty()) {
        if (auto s = apply_memory(raw.memory, c); !s) return s;
    }
    if (!raw.smp.empty()) {
        auto n = parse_uint(raw.smp);
        if (!n || *n < 1 || *n > 256) return Error(fmt::format("--smp: '{}' is not 1 to 256 vCPUs", raw.smp));
        c.vcpus = static_cast<uint32_t>(*n);
    }
    if (!raw.guest.empty()) c.payload = raw.guest;
    if (!raw.append.empty()) {
        if (auto s = validate_payload_params(raw.append); !s) return Error("--append: " + s.error().message());
        c.payload_params = raw.append;
    }
    if (raw.paused) c.start_paused = true;
    if (raw.prealloc) {
        if (c.ram.empty()) c.ram = effective_ram(c);
        for (auto& b : c.ram) b.prealloc = true;
    }
    if (!raw.prefill.empty()) {
        auto v = parse_size(raw.prefill);
        if (!v) return Error("--prefill: " + v.error().message());
        c.prefill = *v;
    }
    if (!raw.incoming.empty()) c.incoming = raw.incoming;
    if (!raw.monitor.empty()) {
        auto e = parse_endpoint(raw.monitor, true);
        if (!e) return Error("--monitor: " + e.error().message());
        c.hmp = *e;
    }
    if (!raw.qmp.empty()) {
        auto e = parse_endpoint(raw.qmp, false);
        if (!e) return Error("--qmp: " + e.error().message());
        c.qmp = *e;
    }
    if (!raw.serial.empty()) {
        auto s = parse_serial_output(raw.serial);
        if (!s) return Error("--serial: " + s.error().message());
        c.serial = *s;
    }
    if (!raw.dirty.empty()) {
        if (raw.dirty == "log") c.dirty_tracking = memory::DirtyBackend::log;
        else if (raw.dirty == "ring") c.dirty_tracking = memory::DirtyBackend::ring;
        else return Error("--dirty-tracking: expected log or ring, got '" + raw.dirty + "'");
    }
    return {};
}

}  // namespace

Result<CommandLine> parse_command_line(int argc, const char* const* argv) {
    CLI::App app{"vmm: a small KVM virtual machine monitor built for live migration over RDMA", "vmm"};
    Raw raw;
    define(app, raw);
    CommandLine out;
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        out.exit_now = true;
        out.text = app.help();
        return out;
    } catch (const CLI::ParseError& e) {
        return Error(fmt::format("{}; run 'vmm --help' for the options", e.what()));
    }
    if (raw.version) {
        out.exit_now = true;
        out.text = fmt::format("vmm {}\n", VMM_VERSION);
        return out;
    }
    if (!raw.config.empty()) {
        auto c = load_config_file(raw.config);
        if (!c) return c.error();
        out.config = std::move(*c);
    }
    if (auto s = apply(raw, out.config); !s) return s.error();
    out.verbose = raw.verbose;
    return out;
}

}  // namespace vmm::config

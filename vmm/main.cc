// vmm: parse the command line, build the machine, boot the payload, serve the monitors, and
// wait until the VM ends. The exit status is the guest's (control device EXIT), 0 after
// 'quit' or a signal, 1 when the VM could not be built or the guest crashed, 2 for bad usage, 3
// after 'quit' on a postcopy destination that still lacked pages only the source has.
#include <signal.h>

#include <cstdio>
#include <optional>

#include "vmm/common/log.h"
#include "vmm/common/signal_watcher.h"
#include "vmm/common/units.h"
#include "vmm/config/cli.h"
#include "vmm/machine/machine.h"
#include "vmm/machine/payload.h"
#include "vmm/memory/prefill.h"
#include "vmm/migration/session/manager.h"
#include "vmm/migration/wire/uri.h"
#include "vmm/monitor/machine_commands.h"
#include "vmm/monitor/migration_commands.h"
#include "vmm/monitor/server.h"

namespace {

using namespace vmm;

Result<machine::MachineSpec> machine_spec(const config::Config& c, monitor::Dispatcher& dispatcher) {
    machine::MachineSpec spec;
    spec.name = c.name;
    spec.vcpus = c.vcpus;
    spec.ram = config::effective_ram(c);
    spec.dirty_backend = c.dirty_tracking;
    spec.start_paused = c.start_paused;
    switch (c.serial.kind) {
        case config::SerialOutput::Kind::none: break;
        case config::SerialOutput::Kind::stdout_stream: spec.serial_sink = devices::stdout_sink(); break;
        case config::SerialOutput::Kind::file: {
            auto sink = devices::file_sink(c.serial.path);
            if (!sink) return sink.error();
            spec.serial_sink = std::move(*sink);
            break;
        }
    }
    spec.guest_message = [](std::string_view line) { log::info("guest: {}", line); };
    spec.state_changed = [&dispatcher](machine::RunState s) {
        switch (s) {
            case machine::RunState::running: dispatcher.emit("RESUME"); break;
            case machine::RunState::paused: dispatcher.emit("STOP"); break;
            case machine::RunState::shutdown: dispatcher.emit("SHUTDOWN"); break;
            case machine::RunState::internal_error: dispatcher.emit("GUEST_PANICKED"); break;
            case machine::RunState::prelaunch:
            case machine::RunState::inmigrate:
            case machine::RunState::postmigrate: break;
        }
    };
    return spec;
}

Result<std::unique_ptr<monitor::MonitorServer>> start_monitor(monitor::Dispatcher& d, monitor::Protocol p,
                                                              const config::Endpoint& e) {
    if (e.kind == config::Endpoint::Kind::none) return std::unique_ptr<monitor::MonitorServer>();
    auto server = monitor::MonitorServer::create(d, p);
    if (!server) return server.error();
    Status s = e.kind == config::Endpoint::Kind::stdio ? (*server)->serve_stdio() : (*server)->listen_unix(e.path, e.mode);
    if (!s) return s.error();
    return std::move(*server);
}

Status apply_migration_defaults(const config::Config& cfg, migration::MigrationManager& mgr) {
    for (const auto& m : cfg.migration.settings) {
        Status s = m.capability ? mgr.set_capability(m.name, m.value == "on") : mgr.set_parameter(m.name, m.value);
        if (!s) return s.error().context(m.where);
    }
    return {};
}

// A bad --incoming is a bad command line (exit 2), found before anything is built: its syntax,
// its port, and for a plugin's scheme, that the plugin is there.
Status check_incoming(const std::string& uri) {
    if (uri.empty()) return {};
    auto u = migration::parse_uri(uri);
    if (!u) return u.error().context("--incoming");
    if (u->scheme == "defer" || migration::TransportRegistry::built_in(u->scheme)) return {};
    if (auto p = migration::TransportRegistry::find_plugin(u->scheme); !p) return p.error().context("--incoming");
    return {};
}

// The QMP events of the migrations: MIGRATION at each status change, X_MIGRATION_STALLED when a
// precopy stalls (x-stall-timeout).
migration::MigrationManager::EventFn status_events(monitor::Dispatcher& dispatcher) {
    return [&dispatcher](migration::MigrationStatus st) {
        dispatcher.emit("MIGRATION", monitor::Json{{"status", migration::to_string(st)}});
    };
}

migration::MigrationManager::StallFn stall_events(monitor::Dispatcher& dispatcher) {
    return [&dispatcher](const migration::StallReport& r) {
        dispatcher.emit("X_MIGRATION_STALLED",
                        monitor::Json{{"lowest-remaining", r.lowest_remaining}, {"what", r.what}, {"action", r.action}});
    };
}

// The payload booted, RAM prefilled first if asked (boot then writes its structures and the
// payload over the start of RAM).
Status load_guest(const config::Config& cfg, machine::Machine& m, const std::string& payload) {
    if (cfg.prefill != 0) {
        if (auto s = memory::prefill_random(m.memory(), cfg.prefill, 1); !s) return s;
    }
    return m.boot(payload, cfg.payload_params);
}

int run(const config::Config& cfg) {
    monitor::Dispatcher dispatcher;
    auto spec = machine_spec(cfg, dispatcher);
    if (!spec) return log::error("{}", spec.error().message()), 1;
    bool incoming = !cfg.incoming.empty();
    Result<std::string> payload = std::string();
    if (!incoming) payload = machine::resolve_payload(cfg.payload);
    if (!payload) return log::error("{}", payload.error().message()), 1;
    std::unique_ptr<machine::Machine> m;
    auto watcher = SignalWatcher::create([&m](int signo) {
        log::info("received {}, ending the VM", signo == SIGINT ? "SIGINT" : "SIGTERM");
        if (m) m->run().end(0);
    });
    if (!watcher) return log::error("{}", watcher.error().message()), 1;
    auto created = machine::Machine::create(*spec);
    if (!created) return log::error("{}", created.error().message()), 1;
    m = std::move(*created);
    if (!incoming) {
        if (auto s = load_guest(cfg, *m, *payload); !s) return log::error("{}", s.error().message()), 1;
    }
    migration::MigrationManager manager(*m, status_events(dispatcher), stall_events(dispatcher));
    if (auto s = apply_migration_defaults(cfg, manager); !s) return log::error("{}", s.error().message()), 2;
    auto incoming_failed = [&m](const Error& e) {
        log::error("incoming migration failed: {}", e.message());
        m->run().end(1);
    };
    // Listen before the monitors answer: whoever sees the monitor may migrate to us at once.
    if (incoming) {
        if (auto s = manager.incoming(cfg.incoming, cfg.start_paused, incoming_failed); !s) {
            return log::error("{}", s.error().message()), 1;
        }
    }
    // Run before the monitors answer, as QEMU does without -S: the first 'info status' a client
    // gets says "running", never "prelaunch".
    if (!incoming && !cfg.start_paused) {
        if (auto s = m->run().resume(); !s) return log::error("{}", s.error().message()), 1;
    }
    monitor::add_machine_commands(dispatcher.table(), *m);
    monitor::add_migration_commands(dispatcher.table(), manager, *m, incoming_failed);
    monitor::add_help_command(dispatcher.table());
    monitor::add_human_monitor_command(dispatcher.table());
    auto hmp = start_monitor(dispatcher, monitor::Protocol::hmp, cfg.hmp);
    if (!hmp) return log::error("{}", hmp.error().message()), 1;
    auto qmp = start_monitor(dispatcher, monitor::Protocol::qmp, cfg.qmp);
    if (!qmp) return log::error("{}", qmp.error().message()), 1;
    log::info("machine '{}': {} on {} vCPU(s), {} RAM, dirty tracking: {}, monitor: {}, qmp: {}", cfg.name,
              incoming ? "incoming migration " + cfg.incoming : "payload " + cfg.payload, cfg.vcpus,
              format_size(m->memory().total_size()), memory::to_string(cfg.dirty_tracking), config::to_string(cfg.hmp),
              config::to_string(cfg.qmp));
    int code = m->run().wait_for_end();
    if (*hmp) (*hmp)->stop();
    if (*qmp) (*qmp)->stop();
    return code;
}

}  // namespace

int main(int argc, char** argv) {
    ::signal(SIGPIPE, SIG_IGN);
    auto cl = vmm::config::parse_command_line(argc, argv);
    if (!cl) {
        vmm::log::error("{}", cl.error().message());
        return 2;
    }
    if (cl->exit_now) {
        std::fputs(cl->text.c_str(), stdout);
        return 0;
    }
    if (cl->verbose) vmm::log::set_level(vmm::log::Level::debug);
    if (auto s = check_incoming(cl->config.incoming); !s) {
        vmm::log::error("{}", s.error().message());
        return 2;
    }
    return run(cl->config);
}

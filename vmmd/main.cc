// vmmd: the vmm driver daemon. It serves libvirt's remote protocol on a unix socket, so that
// stock virsh and libvirt's client library (vmm:///system, vmm:///session,
// vmm+unix:///system?socket=PATH) manage vmm domains. docs/libvirt.md says what it serves.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>

#include "vmm/common/log.h"
#include "vmm/common/search_path.h"
#include "vmm/common/signal_watcher.h"
#include "vmmd/daemon/config_procedures.h"
#include "vmmd/daemon/connect_procedures.h"
#include "vmmd/daemon/domain_capabilities.h"
#include "vmmd/daemon/domain_procedures.h"
#include "vmmd/daemon/events.h"
#include "vmmd/daemon/monitor_events.h"
#include "vmmd/daemon/lifecycle_procedures.h"
#include "vmmd/daemon/qemu_procedures.h"
#include "vmmd/migration/migrations.h"
#include "vmmd/daemon/save_images.h"
#include "vmmd/daemon/stats_procedures.h"
#include "vmmd/server/server.h"
#include "vmmd/peer/peer_migration.h"

namespace {

// Where libvirt's client looks for the vmm driver's daemon: virtvmmd-sock in /run/libvirt for
// root, in $XDG_RUNTIME_DIR/libvirt for anyone else; the read-only socket beside it, -ro.
std::string default_socket(bool root) {
    if (root) return "/run/libvirt/virtvmmd-sock";
    const char* run = std::getenv("XDG_RUNTIME_DIR");
    return std::string(run != nullptr && *run != '\0' ? run : "/tmp") + "/libvirt/virtvmmd-sock";
}

std::string default_state_dir(bool root) {
    if (root) return "/var/lib/vmm";
    const char* state = std::getenv("XDG_STATE_HOME");
    if (state != nullptr && *state != '\0') return std::string(state) + "/vmm";
    const char* home = std::getenv("HOME");
    return std::string(home != nullptr ? home : "/tmp") + "/.local/state/vmm";
}

// --listen-tls HOST[:PORT]: libvirtd's TLS port when none is named ([V6ADDR] as in --listen-tcp).
std::string tls_address(const std::string& where) {
    bool has_port = where.starts_with('[') ? where.find("]:") != std::string::npos
                                           : where.find(':') != std::string::npos && where.find(':') == where.rfind(':');
    return has_port ? where : where + ":16514";
}

// libvirt's pki layout: --pki-dir's three files, else libvirtd's defaults.
vmmd::TlsServerConfig tls_config(const std::string& pki_dir, const std::string& allowed) {
    vmmd::TlsServerConfig c;
    if (pki_dir.empty()) {
        c.files = {"/etc/pki/CA/cacert.pem", "/etc/pki/libvirt/servercert.pem", "/etc/pki/libvirt/private/serverkey.pem",
                   "/etc/pki/CA/cacrl.pem"};
    } else {
        c.files = {pki_dir + "/cacert.pem", pki_dir + "/servercert.pem", pki_dir + "/serverkey.pem", pki_dir + "/cacrl.pem"};
    }
    c.allowed = allowed;
    return c;
}

// A random (version 4) UUID for a domain defined without one.
vmmd::Uuid random_uuid() {
    std::random_device rd;
    vmmd::Uuid u{};
    for (auto& b : u) b = static_cast<uint8_t>(rd());
    u[6] = static_cast<uint8_t>((u[6] & 0x0f) | 0x40);
    u[8] = static_cast<uint8_t>((u[8] & 0x3f) | 0x80);
    return u;
}

// What the command line says.
struct Options {
    bool root = false;
    std::string socket, state_dir, vmm_binary;
    std::string listen_tcp, listen_tls, pki_dir, tls_allowed, migration_address, migrate_tls_dir;
    size_t max_clients = 256, max_ro_clients = 512, max_ro_per_user = 16;
    unsigned ro_idle_seconds = 300;
    bool tcp_insecure = false;
    vmmd::MigrationDeadline deadline;  // --migration-deadline and its kin, for every migration
};

void add_listening_options(CLI::App& app, Options& o) {
    app.add_option("--listen-tls", o.listen_tls,
                   "also serve HOST[:PORT] over TLS (port 16514, as libvirtd's): every client presents a certificate "
                   "the CA signed (virsh -c 'vmm+tls://HOST/system'); CONNECT_IS_SECURE is true there");
    app.add_option("--pki-dir", o.pki_dir,
                   "for --listen-tls: a directory of cacert.pem, servercert.pem and serverkey.pem (default: libvirt's, "
                   "/etc/pki/CA/cacert.pem, /etc/pki/libvirt/servercert.pem, /etc/pki/libvirt/private/serverkey.pem)");
    app.add_option("--max-clients", o.max_clients, "clients served at once on the read-write socket, and on each TCP or TLS one")
        ->capture_default_str()
        ->check(CLI::Range(1, 100000));
    app.add_option("--max-readonly-clients", o.max_ro_clients,
                   "clients served at once on the read-only socket, all users' (every user may connect to it as root's)")
        ->capture_default_str()
        ->check(CLI::Range(1, 100000));
    app.add_option("--max-readonly-clients-per-user", o.max_ro_per_user,
                   "clients of one user served at once on the read-only socket: one user's idle connections never "
                   "lock another's monitoring out")
        ->capture_default_str()
        ->check(CLI::Range(1, 100000));
    app.add_option("--readonly-idle-timeout", o.ro_idle_seconds,
                   "seconds a read-only client may send nothing (no call, no keepalive) before it is closed (0: no "
                   "limit); every client must open its connection within 10 s")
        ->capture_default_str()
        ->check(CLI::Range(0, 86400));
    app.add_option("--tls-allowed-dn", o.tls_allowed,
                   "for --listen-tls: the client certificates accepted, ';'-separated patterns matched against the "
                   "distinguished name (CN=admin,O=Lab) or, without '=', the common name (libvirtd's "
                   "tls_allowed_dn_list; default: any the CA signed)");
    app.add_option("--listen-tcp", o.listen_tcp,
                   "also serve HOST:PORT over TCP, unauthenticated and in plaintext (libvirtd's auth_tcp=none): what a "
                   "--p2p source reaches as vmm+tcp://HOST:PORT/system; only with --listen-tcp-insecure, on a network "
                   "where every host is trusted (else --listen-tls)");
    app.add_flag("--listen-tcp-insecure", o.tcp_insecure,
                 "allow --listen-tcp: say that whoever can reach its address may manage every domain on this host");
}

// The command line into `o`; an exit status when vmmd is to stop at once (help, a bad option).
std::optional<int> parse_options(int argc, char** argv, Options& o) {
    o.root = ::geteuid() == 0;
    o.socket = default_socket(o.root);
    o.state_dir = default_state_dir(o.root);
    o.vmm_binary = vmm::search_path("VMM_BIN_DIR", {"bin"}).find("vmm").value_or("vmm");
    CLI::App app{"vmmd: libvirt's remote protocol for vmm domains (virsh -c vmm:///system)"};
    app.add_option("--socket", o.socket, "the read-write socket; the read-only one is PATH-ro")->capture_default_str();
    app.add_option("--state-dir", o.state_dir, "where domain definitions and running domains' sockets live")
        ->capture_default_str();
    app.add_option("--vmm", o.vmm_binary, "the vmm executable each running domain is")->capture_default_str();
    add_listening_options(app, o);
    app.add_option("--migration-address", o.migration_address,
                   "where incoming migrations listen when their URI names no host (libvirt's migration_address); "
                   "default: the address this host's name resolves to, never every address");
    app.add_option("--migration-deadline", o.deadline.deadline,
                   "every migration ends within this time (vmm's x-deadline: 30s, 5m, 2h), unless its domain's XML "
                   "(<vmm:migration-deadline>) or its parameters (vmm.deadline) say otherwise");
    app.add_option("--migration-deadline-strategy", o.deadline.strategy,
                   "what a migration gives up first when it would miss its deadline or stalls: cancel (vmm's default), "
                   "postcopy, downtime, throttle, dirty-limit (a domain with <vmm:dirty-tracking>ring), cheapest (downtime or "
                   "throttle, whichever costs the guest less), or several in the order to try them")
        ->check([](const std::string& s) { return vmmd::deadline_strategy_refusal(s).value_or(""); });
    app.add_option("--migration-stall-timeout", o.deadline.stall_timeout_ms,
                   "ms with no progress after which a migration has stalled (vmm's x-stall-timeout; 0 = off)")
        ->check(CLI::Range(uint64_t{0}, uint64_t{86'400'000}));
    app.add_option("--migrate-tls-dir", o.migrate_tls_dir,
                   "credentials for 'virsh migrate --tls' (QEMU's layout: ca-cert.pem, server-cert.pem, server-key.pem, "
                   "client-cert.pem, client-key.pem; libvirt's migrate_tls_x509_cert_dir): both vmm of such a migration "
                   "authenticate each other and every connection is TLS");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    if (!o.listen_tcp.empty() && !o.tcp_insecure) {
        std::fprintf(stderr, "vmmd: --listen-tcp %s would hand every domain on this host to anyone who can reach it, with "
                             "no authentication and no encryption: use --listen-tls, or add --listen-tcp-insecure if "
                             "every host on that network is trusted\n",
                     o.listen_tcp.c_str());
        return 2;
    }
    return std::nullopt;
}

// Root: the read-write socket is root's alone and the read-only one anyone's, as libvirtd's;
// any other user: both are the owner's alone. TCP and TLS as asked.
std::vector<vmmd::SocketSpec> socket_specs(const Options& o) {
    vmmd::SocketSpec ro{o.socket + "-ro", true, mode_t(o.root ? 0666 : 0600), false, std::nullopt, o.max_ro_clients};
    ro.max_per_user = o.max_ro_per_user;
    ro.idle_limit = std::chrono::seconds(o.ro_idle_seconds);
    std::vector<vmmd::SocketSpec> sockets = {{o.socket, false, 0600, false, std::nullopt, o.max_clients}, ro};
    if (!o.listen_tcp.empty()) sockets.push_back({o.listen_tcp, false, 0, true, std::nullopt, o.max_clients});
    if (!o.listen_tls.empty()) {
        sockets.push_back({tls_address(o.listen_tls), false, 0, true, tls_config(o.pki_dir, o.tls_allowed), o.max_clients});
    }
    return sockets;
}

int failed(const vmm::Error& e) {
    std::fprintf(stderr, "vmmd: %s\n", e.message().c_str());
    return 1;
}

void log_serving(const Options& o) {
    vmm::log::info("vmmd: serving {} (read-only: {}-ro); state in {}", o.socket, o.socket, o.state_dir);
    if (!o.listen_tcp.empty()) {
        vmm::log::warn("vmmd: also serving TCP {} (--listen-tcp-insecure): no authentication, no encryption: anyone who "
                       "reaches it can define, start, destroy and migrate every domain here, and read what crosses it",
                       o.listen_tcp);
    }
    if (!o.listen_tls.empty()) {
        vmm::log::info("vmmd: also serving TLS {}: clients present a certificate the CA signed", tls_address(o.listen_tls));
    }
}

// What every domain's procedures share, made in order (each part lives as long as those after it).
struct Parts {
    vmmd::DomainStore& store;
    vmmd::Supervisor& supervisor;
    vmmd::Migrations& migrations;
    vmmd::SaveImages& images;
    vmmd::Supervisor::Listener lifecycle;
};

// The procedures that act on domains: definitions, lifecycle, configuration, statistics, and the
// QEMU program's monitor command.
void add_domain_procedures(std::vector<vmmd::rpc::Procedure>& table, const vmmd::DriverIdentity& id, Parts& p) {
    vmmd::ManagedSaves managed_save{[&images = p.images](const vmmd::DomainDef& def) { return images.has_managed(def); },
                                    [&images = p.images](const vmmd::DomainDef& def, bool remove) { return images.undefining(def, remove); },
                                    [&sup = p.supervisor](const vmmd::Uuid& uuid) { return sup.cpu_time_ns(uuid); }};
    for (auto& f : vmmd::domain_procedures(p.store, random_uuid, p.lifecycle, managed_save, id.emulator)) table.push_back(std::move(f));
    for (auto& f : vmmd::lifecycle_procedures(p.store, p.supervisor, random_uuid, p.images, id.emulator)) table.push_back(std::move(f));
    for (auto& f : vmmd::config_procedures(p.store)) table.push_back(std::move(f));
    for (auto& f : vmmd::stats_procedures(p.store, [&sup = p.supervisor](const vmmd::Uuid& uuid) { return sup.vmm_pid(uuid); }))
        table.push_back(std::move(f));
    auto monitor = [&sup = p.supervisor](const vmmd::Uuid& uuid, const std::string& command, const vmm::monitor::Json& args) {
        return sup.qmp(uuid, command, args);
    };
    for (auto& f : vmmd::qemu_procedures(p.store, monitor)) table.push_back(std::move(f));
}

vmmd::Migrations::Events migration_events(vmmd::EventHub& events) {
    return {[&events](const vmmd::DomainDef& def, int dom_id, int n) { events.migration_iteration(def, dom_id, n); },
            [&events](const vmmd::DomainDef& def, int dom_id, const vmmd::JobStats& s) {
                events.job_completed(def, dom_id, vmmd::job_params(s));
            }};
}

// Events reach a client connection through both hubs; its end also ends what it held of a
// migration, unless vmmd is stopping (connections close then too: that ends no migration).
vmmd::ConnectionHooks connection_hooks(vmmd::EventHub& events, vmmd::MonitorEventHub& monitor, vmmd::Migrations& migrations,
                                       const std::atomic<bool>& stopping) {
    return {[&events, &monitor](uint64_t c, std::shared_ptr<vmmd::Outbox> out) {
                events.connected(c, out);
                monitor.connected(c, std::move(out));
            },
            [&events, &monitor, &migrations, &stopping](uint64_t c) {
                events.disconnected(c);
                monitor.disconnected(c);
                if (!stopping) migrations.connection_closed(c);
            }};
}

// Serves until a signal stops it. The signal watcher comes before any other thread (the vmm
// supervisor's), so that every thread has the signals blocked and none dies of them; the server
// is declared first so that it outlives the watcher's thread, and the clients' threads end before
// what they call into (declared after the server) goes.
int serve(const Options& o) {
    std::unique_ptr<vmmd::Server> server;
    std::atomic<vmmd::Server*> serving{nullptr};
    std::atomic<bool> stopping{false};
    auto watcher = vmm::SignalWatcher::create([&serving, &stopping](int) {
        stopping = true;
        if (vmmd::Server* s = serving.load()) s->stop();
    });
    if (!watcher) return failed(watcher.error());
    vmmd::DriverIdentity id{o.root ? "vmm:///system" : "vmm:///session", vmmd::libvirt_version_number(VMM_VERSION),
                            o.vmm_binary};
    auto warn = [](const std::string& w) { vmm::log::warn("vmmd: {}", w); };
    auto store = vmmd::DomainStore::open(o.state_dir, random_uuid, warn);
    if (!store) return failed(store.error());
    vmmd::EventHub events;
    vmmd::Supervisor::Listener lifecycle = [&events](const vmmd::DomainDef& def, int dom_id, vmmd::LifecycleEvent e) {
        events.lifecycle(def, dom_id, e);
    };
    vmmd::MonitorEventHub monitor_events;  // before the supervisor: its vmms' readers call into it
    vmmd::Supervisor::MonitorListener relay = [&monitor_events](const vmmd::DomainDef& def, int dom_id, const vmm::monitor::Json& e) {
        monitor_events.relay(def, dom_id, e);
    };
    auto supervisor = vmmd::Supervisor::create({o.vmm_binary, o.state_dir}, **store, lifecycle, relay, warn);
    if (!supervisor) return failed(supervisor.error());
    std::vector<vmmd::rpc::Procedure> table = vmmd::connect_procedures(id);
    for (auto& p : vmmd::capability_procedures(id)) table.push_back(std::move(p));
    for (auto& p : events.procedures()) table.push_back(std::move(p));
    for (auto& p : monitor_events.procedures()) table.push_back(std::move(p));
    vmmd::Migrations migrations(**store, **supervisor, vmmd::local_hostname(), vmmd::peer::self_uri(id.default_uri, o.socket),
                                migration_events(events));
    if (!o.migrate_tls_dir.empty()) migrations.use_migration_tls(o.migrate_tls_dir);
    migrations.use_migration_deadline(o.deadline);
    // VIR_MIGRATE_CHANGE_PROTECTION (libvirt's client asks for it whenever vmmd offers feature 7):
    // a domain's definition stays as it is while its outgoing migration runs.
    (*store)->set_guard([&migrations](const vmmd::Uuid& uuid) { return migrations.change_refusal(uuid); });
    if (!o.migration_address.empty()) migrations.use_migration_address(o.migration_address);
    for (auto& p : migrations.procedures()) table.push_back(std::move(p));
    vmmd::SaveImages images(**store, **supervisor, migrations.jobs(), o.state_dir + "/save");
    if (auto s = images.open(); !s) return failed(s.error());
    for (auto& p : images.procedures()) table.push_back(std::move(p));
    vmmd::autostart_domains(**store, **supervisor, images, o.state_dir + "/autostarted");
    Parts parts{**store, **supervisor, migrations, images, lifecycle};
    add_domain_procedures(table, id, parts);
    vmmd::rpc::Dispatcher dispatcher(std::move(table));
    vmmd::ConnectionHooks hooks = connection_hooks(events, monitor_events, migrations, stopping);
    auto s = vmmd::Server::listen(socket_specs(o), dispatcher, hooks);
    if (!s) return failed(s.error());
    server = std::move(*s);
    serving = server.get();
    if (stopping) server->stop();  // a signal came while vmmd was starting
    log_serving(o);
    auto r = server->run();
    migrations.stop();
    server->join_clients();
    if (!r) return failed(r.error());
    vmm::log::info("vmmd: stopped");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options options;
    if (auto done = parse_options(argc, argv, options)) return *done;
    return serve(options);
}

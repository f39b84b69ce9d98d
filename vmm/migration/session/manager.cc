#include "vmm/migration/session/manager.h"

#include <fmt/format.h>

#include <chrono>

#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"
#include "vmm/migration/precopy/deadline.h"
#include "vmm/stream/tls_credentials.h"

namespace vmm::migration {

MigrationManager::MigrationManager(machine::Machine& m, EventFn on_event, StallFn on_stall)
    : machine_(m), on_event_(std::move(on_event)), on_stall_(std::move(on_stall)), warm_([this] { warm_transports(); }) {}

MigrationManager::~MigrationManager() {
    warm_.join();
    // Stop the threads before the machine they drive goes away.
    std::unique_ptr<MigrationSource> out;
    std::unique_ptr<IncomingMigration> in;
    {
        std::lock_guard lock(mutex_);
        out = std::move(outgoing_);
        in = std::move(incoming_);
    }
}

void MigrationManager::warm_transports() {
    name_this_thread("transport-warm");
    for (const auto& scheme : TransportRegistry::plugin_schemes()) {
        Transport* t = nullptr;
        {
            std::lock_guard lock(mutex_);  // the registry is the monitor's too
            auto got = registry_.get(scheme);
            if (!got) continue;  // said again, with its reason, when the scheme is used
            t = *got;
        }
        t->warm_up();  // outside the lock: a migration may connect meanwhile
    }
}

Settings MigrationManager::settings() const { return settings_->get(); }

// "rdma-pin-all" belongs to the rdma: transport: load its plugin so it can declare its names.
Result<bool> MigrationManager::declare_plugin_names(const std::string& name) {
    // A transport's names are SCHEME-NAME, or x-SCHEME-NAME for an experimental one (QEMU's x-).
    std::string_view rest = name.rfind("x-", 0) == 0 ? std::string_view(name).substr(2) : std::string_view(name);
    size_t dash = rest.find('-');
    if (dash == std::string::npos || dash == 0) return false;
    std::string scheme(rest.substr(0, dash));
    if (!TransportRegistry::built_in(scheme) && !TransportRegistry::find_plugin(scheme)) return false;
    auto t = registry_.get(scheme);
    if (!t) return t.error();
    declare_names(**t);
    return true;
}

Status MigrationManager::retry_with_plugin_names(const std::string& name, Status first, const std::function<Status()>& set) {
    if (first) return first;
    auto declared = declare_plugin_names(name);
    if (!declared) return declared.error();
    return *declared ? set() : first;
}

void MigrationManager::declare_names(const Transport& t) {
    settings_->change([&](Settings& s) {
        for (const auto& row : t.settings()) s.declare_transport_setting(row);
    });
}

// A destination listening on a plugin's transport took the settings its listener is given when
// it started listening: a change to one of those is refused rather than shown and not used
// (tcp/unix read them when the source connects; the others are read then on every transport).
Status MigrationManager::check_not_taken(const std::string& name) const {
    if (!incoming_ || !incoming_->waits_with_settings_taken()) return {};
    const SettingRow* row = find_setting(name);
    if (row != nullptr && !row->listener_reads) return {};
    return Error(fmt::format("'{}' cannot change now: this destination already listens on {}, whose transport took the "
                             "settings when it started listening; start vmm with '--incoming defer', set it, then "
                             "'migrate_incoming URI'",
                             name, incoming_->stats().uri));
}

// With tls-creds set, a transport that carries no TLS is refused: never plaintext behind the
// user's back.
Status MigrationManager::check_tls(const Transport& t) const {
    if (!tls_wanted(settings_->get().params) || t.carries_tls() || !t.has_peer()) return {};
    return Error(fmt::format("tls-creds is set, and {}: carries no TLS (tcp: and unix: do): clear it "
                             "(migrate_set_parameter tls-creds \"\") to migrate over {}: in plaintext",
                             t.scheme(), t.scheme()));
}

// x-deadline's strategy must be one this migration can follow: postcopy needs postcopy-ram,
// dirty-limit the dirty ring.
Status MigrationManager::check_deadline_strategy_usable(const Options& o) {
    bool acts = o.params.deadline != "off" || o.params.stall_timeout_ms != 0;  // x-deadline or x-stall-timeout
    if (!acts) return {};
    if (names_strategy(o.params.deadline_strategy, DeadlineStrategy::dirty_limit)) {
        if (auto l = machine_.dirty_limiter(); !l) return Error("x-deadline-strategy dirty-limit: " + l.error().message());
    }
    if (!names_strategy(o.params.deadline_strategy, DeadlineStrategy::postcopy) || o.caps.postcopy_ram) return {};
    return Error("x-deadline-strategy postcopy needs postcopy-ram on both sides (migrate_set_capability postcopy-ram on; "
                 "at the destination before migrate_incoming), or another strategy");
}

Status MigrationManager::set_capability(const std::string& name, bool on) {
    std::lock_guard lock(mutex_);
    if (auto s = check_not_taken(name); !s) return s;
    auto set = [&] { return settings_->change([&](Settings& s) { return s.set_capability(name, on); }); };
    return retry_with_plugin_names(name, set(), set);
}

Status MigrationManager::set_parameter(const std::string& name, const std::string& value) {
    std::lock_guard lock(mutex_);
    if (auto s = check_not_taken(name); !s) return s;
    const SettingRow* row = find_setting(name);
    bool credentials = row != nullptr && row->credentials && !value.empty();
    if (credentials && incoming_ && incoming_->waits_without_tls()) {
        return Error(fmt::format("{}: this destination listens on {}, which carries no TLS (tcp: and unix: do)", name,
                                 incoming_->stats().uri));
    }
    auto set = [&] { return settings_->change([&](Settings& s) { return s.set_parameter(name, value); }); };
    auto s = retry_with_plugin_names(name, set(), set);
    // As QEMU loads a tls-creds object when it is made: the first handshake then only does the
    // handshake (a key and certificate left unreadable are reported by the migration, saying which).
    if (s && credentials) stream::TlsCredentials::warm(value);
    // Like QEMU, a live setting (a bandwidth cap) applies to the migration already running: it
    // reads settings_->live() as it goes.
    return s;
}

Status MigrationManager::migrate(const std::string& text) {
    auto asked = std::chrono::steady_clock::now();  // total time counts loading the transport too
    auto uri = parse_uri(text);
    if (!uri) return uri.error();
    if (uri->scheme == "defer") return Error("'defer' is for --incoming only");
    std::lock_guard lock(mutex_);
    if (outgoing_ && !is_terminal(outgoing_->stats().status)) {
        return Error("a migration is already in progress: 'info migrate' shows it, 'migrate_cancel' stops it");
    }
    if (deferred_ || (incoming_ && !is_terminal(incoming_->stats().status))) {
        return Error("this VM is still a migration destination: wait until its incoming migration completes");
    }
    // A VM that arrived by migration may leave again, as under QEMU: the finished incoming
    // migration (its thread already done) gives way, and 'info migrate' shows the new one.
    incoming_.reset();
    auto state = machine_.run().state();
    if (state != machine::RunState::running && state != machine::RunState::paused) {
        return Error(fmt::format("cannot migrate a VM in state '{}'", machine::to_string(state)));
    }
    auto transport = registry_.get(uri->scheme);
    if (!transport) return transport.error();
    if (auto s = check_tls(**transport); !s) return s;
    if (auto s = check_deadline_strategy_usable(settings_->get()); !s) return s;
    declare_names(**transport);
    auto fallback = fallback_way(**transport);
    if (!fallback) return fallback.error();
    auto token = stream::CancelToken::create();
    if (!token) return token.error();
    // Whatever the last migration was, it took the dirty log: only a completed save to a file
    // leaves one that an incremental save can build on.
    if (outgoing_) last_save_ = outgoing_->saved_id();
    outgoing_.reset();  // joins the previous, finished migration's thread
    outgoing_ = std::make_unique<MigrationSource>(machine_, **transport, *uri, Options(settings_->get()), settings_->live(),
                                                  std::move(*token), on_event_);
    outgoing_->set_last_save(last_save_);
    if (*fallback) outgoing_->set_fallback(**fallback);
    outgoing_->set_on_stall(on_stall_);
    outgoing_->start(asked);
    return {};
}

// x-fallback-uri, checked before the migration begins: a URI of a transport this vmm has, for a
// precopy that resumes.
Result<std::optional<ResumeTo>> MigrationManager::fallback_way(Transport& own) {
    Options o(settings_->get());
    if (o.params.fallback_uri.empty()) return std::optional<ResumeTo>{};
    auto uri = parse_uri(o.params.fallback_uri);
    if (!uri) return uri.error().context("x-fallback-uri");
    if (uri->scheme == "defer" || uri->scheme == "file") {
        return Error(fmt::format("x-fallback-uri {}: a fallback is another way to the same destination (tcp:, unix:, "
                                 "rdma:), not '{}'",
                                 uri->text, uri->scheme));
    }
    if (o.params.resume_window_ms == 0) {
        return Error("x-fallback-uri is where a precopy resumes after a broken link: set x-resume-window above 0 too");
    }
    auto t = registry_.get(uri->scheme);
    if (!t) return t.error().context("x-fallback-uri");
    if (auto s = check_tls(**t); !s) return s.error().context("x-fallback-uri");
    if (*t != &own) declare_names(**t);
    return std::optional<ResumeTo>(ResumeTo{*t, *uri, true});
}

Status MigrationManager::cancel() {
    std::lock_guard lock(mutex_);
    if (!outgoing_) return {};
    auto st = outgoing_->stats().status;
    if (st == MigrationStatus::postcopy_active || st == MigrationStatus::postcopy_paused ||
        st == MigrationStatus::postcopy_recover) {
        return Error("postcopy cannot be cancelled: the guest already runs on the destination, which lacks pages only "
                     "this side has");
    }
    outgoing_->cancel();
    return {};
}

Status MigrationManager::start_postcopy() {
    std::lock_guard lock(mutex_);
    if (!outgoing_) return Error("no outgoing migration to switch to postcopy: start one with 'migrate' first");
    return outgoing_->start_postcopy();
}

Status MigrationManager::resume(const std::string& text) {
    auto uri = parse_uri(text);
    if (!uri) return uri.error();
    std::lock_guard lock(mutex_);
    if (!outgoing_) return Error("'migrate -r' resumes an outgoing postcopy whose link broke; there is no outgoing migration");
    auto transport = registry_.get(uri->scheme);
    if (!transport) return transport.error();
    if (auto s = check_tls(**transport); !s) return s;
    return outgoing_->resume(**transport, *uri);
}

Status MigrationManager::recover(const std::string& text) {
    auto uri = parse_uri(text);
    if (!uri) return uri.error();
    if (uri->scheme == "defer") return Error("migrate_recover needs the URI to listen on, not 'defer'");
    std::lock_guard lock(mutex_);
    if (!incoming_) return Error("migrate_recover resumes an incoming postcopy whose link broke; there is no incoming migration");
    auto transport = registry_.get(uri->scheme);
    if (!transport) return transport.error();
    if (auto s = check_tls(**transport); !s) return s;
    return incoming_->recover(**transport, *uri);
}

Status MigrationManager::pause() {
    std::lock_guard lock(mutex_);
    if (outgoing_) return outgoing_->pause_link();
    if (incoming_) return incoming_->pause_link();
    return Error("migrate_pause pauses a migration in postcopy-active; there is no migration");
}

Status MigrationManager::incoming(const std::string& text, bool stay_paused, FailFn on_failure) {
    auto uri = parse_uri(text);
    if (!uri) return uri.error();
    std::lock_guard lock(mutex_);
    if (incoming_) return Error("an incoming migration is already set up");
    auto state = machine_.run().state();
    if (state != machine::RunState::prelaunch && state != machine::RunState::inmigrate) {
        return Error("the VM has already run: start a new vmm with --incoming");
    }
    if (uri->scheme == "defer") {
        deferred_ = true;
        machine_.run().set_incoming();
        return {};
    }
    auto transport = registry_.get(uri->scheme);
    if (!transport) return transport.error();
    if (auto s = check_tls(**transport); !s) return s;
    auto token = stream::CancelToken::create();
    if (!token) return token.error();
    declare_names(**transport);
    // The destination reads the settings when its source connects: a change made on this
    // monitor while it waits is used (QEMU's classic recipe sets capabilities then).
    auto settings = [shared = settings_] { return Options(shared->get()); };
    auto in = std::make_unique<IncomingMigration>(machine_, **transport, *uri, std::move(settings), std::move(*token),
                                                  stay_paused, on_event_, std::move(on_failure));
    in->find_transports_with([this](const std::string& scheme) -> Result<Transport*> {
        auto t = registry_.get(scheme);
        if (!t) return t.error();
        if (auto s = check_tls(**t); !s) return s.error();
        return t;
    });
    if (auto s = in->listen(); !s) return s;
    in->start();
    incoming_ = std::move(in);
    deferred_ = false;
    return {};
}

bool MigrationManager::incoming_deferred() const {
    std::lock_guard lock(mutex_);
    return deferred_;
}

Status MigrationManager::serve(const std::string& path, const std::string& uri) {
    std::lock_guard lock(mutex_);
    if (serving_) return Error(fmt::format("this vmm serves file:{} at {} already: x-pull-serve-stop first", serving_->path(), serving_->uri()));
    auto settings = settings_;
    auto s = FileServing::start(registry_, path, uri, [settings]() -> Options { return settings->get(); });
    if (!s) return s.error();
    serving_ = std::move(*s);
    return {};
}

Status MigrationManager::stop_serving() {
    std::unique_ptr<FileServing> ending;
    {
        std::lock_guard lock(mutex_);
        if (!serving_) return Error("this vmm serves no saved guest (x-pull-serve FILE URI starts one)");
        ending = std::move(serving_);
    }
    log::info("no longer serving file:{} at {}", ending->path(), ending->uri());
    return {};
}

std::optional<MigrationManager::Serving> MigrationManager::serving() const {
    std::lock_guard lock(mutex_);
    if (!serving_) return std::nullopt;
    return Serving{serving_->path(), serving_->uri(), serving_->size(), serving_->clients()};
}

MigrationStats MigrationManager::query() const {
    std::lock_guard lock(mutex_);
    if (outgoing_) return outgoing_->stats();
    if (incoming_) return incoming_->stats();
    return {};
}

}  // namespace vmm::migration

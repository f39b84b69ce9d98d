#include "vmm/migration/session/params.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "vmm/common/units.h"
#include "vmm/migration/precopy/deadline.h"

namespace vmm::migration {

namespace {

using Kind = SettingRow::Kind;
using C = Capabilities;
using P = Parameters;

SettingRow cap(std::string_view name, bool C::*field, std::string_view help) {
    return {name, help, Kind::capability, field, nullptr, 0, 1, std::nullopt, false};
}

SettingRow integer(std::string_view name, uint64_t P::*field, uint64_t min, uint64_t max, std::string_view help) {
    return {name, help, Kind::integer, nullptr, field, min, max, std::nullopt, false};
}

SettingRow size(std::string_view name, uint64_t P::*field, uint64_t max, std::optional<Live> live, std::string_view help) {
    return {name, help, Kind::size, nullptr, field, 0, max, live, false};
}

SettingRow text(std::string_view name, std::string P::*field, std::string_view help) {
    return {name, help, Kind::text, nullptr, nullptr, 0, 0, std::nullopt, false, field};
}

// A text row whose values `check` accepts.
SettingRow checked(SettingRow row, Status (*check)(std::string_view)) {
    row.check = check;
    return row;
}

SettingRow credentials(SettingRow row) {
    row.credentials = true;
    return row;
}

// The row, marked as one a transport's listener is given.
SettingRow listener(SettingRow row) {
    row.listener_reads = true;
    return row;
}

}  // namespace

namespace {
// The capabilities' rows (on or off), then the parameters': the rounds and their timing, then
// TLS and the deadline.
std::vector<SettingRow> capability_rows() {
    return {
        cap("auto-converge", &C::auto_converge, "throttle the vCPUs when dirty rounds do not converge"),
        cap("zero-blocks", &C::zero_blocks, "send zero pages as markers instead of data"),
        cap("events", &C::events, "emit MIGRATION events on the JSON monitor"),
        cap("zero-copy-send", &C::zero_copy_send,
            "tcp/unix: splice guest RAM into the socket instead of copying it (to a remote destination)"),
        cap("x-zero-copy-local", &C::zero_copy_local, "with zero-copy-send: splice to a destination on this host too (slower there)"),
        cap("multifd", &C::multifd, "tcp/unix: send RAM over multifd-channels connections, one thread each side"),
        cap("x-tls-kernel", &C::tls_kernel,
            "tcp, with tls-creds: the kernel's TLS encrypts what this side sends (modprobe tls), so guest RAM is "
            "spliced into the socket again; where the kernel cannot renew a sending key (before Linux 6.14) a "
            "connection fails after x-tls-rekey-records records rather than go past its key's limit"),
        cap("verify-ram", &C::verify_ram, "checksum every page record (XXH3) on the source, check it on the destination"),
        listener(cap("postcopy-ram", &C::postcopy_ram,
                     "both sides: allow switching to postcopy (migrate_start_postcopy, x-postcopy-after-rounds)")),
        cap("postcopy-preempt", &C::postcopy_preempt,
            "tcp/unix, both sides, with postcopy-ram (on): the pages faults wait on go on a connection of their own, "
            "never behind the background push"),
        listener(cap("x-restore-mapped", &C::restore_mapped,
                     "--incoming file:: map the saved RAM into the guest (MAP_PRIVATE) instead of reading it: the guest "
                     "runs at once, its pages come from the page cache as it touches them (shared with every vmm "
                     "restored from the file), each checked against its sum in the background (a damaged page ends "
                     "the guest, naming it)")),
        listener(cap("x-restore-lazy", &C::restore_lazy,
                     "--incoming file: (on by default): run the guest as soon as its device state is loaded and "
                     "bring its RAM in while it runs: a page it touches first (userfaultfd), the rest in file order, "
                     "each checked against its sum before it is placed; info migrate shows it as a postcopy (faults, "
                     "latency, blocked time). A chain of saves, or a machine without userfaultfd, is read first "
                     "instead; x-restore-mapped takes precedence")),
    };
}

std::vector<SettingRow> parameter_rows() {
    return {
        listener(size("max-bandwidth", &P::max_bandwidth, UINT64_MAX, Live::max_bandwidth,
                      "bandwidth cap in bytes/s (40g, 512m; 0 = unlimited)")),
        integer("downtime-limit", &P::downtime_limit_ms, 1, 2000000, "longest acceptable pause, ms"),
        integer("cpu-throttle-initial", &P::cpu_throttle_initial, 1, 99, "first throttle step, percent"),
        integer("cpu-throttle-increment", &P::cpu_throttle_increment, 1, 99, "further throttle steps, percent"),
        integer("max-cpu-throttle", &P::max_cpu_throttle, 1, 99, "throttle ceiling, percent"),
        integer("x-throttle-after-rounds", &P::throttle_after_rounds, 1, 1000,
                "dirty rounds that fail to converge before throttling starts"),
        listener(integer("x-connect-timeout", &P::connect_timeout_ms, 100, 3600000, "connect timeout, ms")),
        listener(integer("x-io-timeout", &P::io_timeout_ms, 100, 3600000, "peer silence that fails a migration, ms")),
        integer("x-resume-window", &P::resume_window_ms, 0, 3600000,
                "source, tcp/unix/rdma precopy: when the link breaks, both sides wait this long (ms) in precopy-paused while "
                "the source reconnects by itself (or 'migrate -r URI' / 'migrate_recover URI' name another way), then "
                "go on from where they were; 0 = the migration fails at once"),
        text("x-fallback-uri", &P::fallback_uri,
             "a precopy that resumes (x-resume-window): another way to the same destination (e.g. tcp:HOST:PORT "
             "beside rdma:). Source: when the link breaks and its own way has not come back within 2 s, each try "
             "alternates between the two; the rest of the migration goes the way that worked. Destination: it "
             "listens there too once such a precopy began (as 'migrate_recover URI' while it runs) (empty = none)"),
        integer("x-switchover-cut", &P::switchover_cut, 0, 4,
                "fault injection, for tests: in a resumable precopy's hand-over this side cuts its own link after step "
                "N (1 STATE, 2 READY, 3 GO, 4 RUNNING; 0 = never), as a network failing there would"),
        integer("multifd-channels", &P::multifd_channels, 1, 16, "connections for RAM when multifd is on (1 to 16)"),
        integer("x-postcopy-after-rounds", &P::postcopy_after_rounds, 0, 1000,
                "with postcopy-ram: switch to postcopy after this many rounds, the bulk round included "
                "(0 = only on migrate_start_postcopy)"),
        size("max-postcopy-bandwidth", &P::max_postcopy_bandwidth, UINT64_MAX, Live::max_postcopy_bandwidth,
             "bandwidth cap of postcopy's background push in bytes/s (0 = unlimited; requested pages are never held back)"),
        size("x-postcopy-readahead", &P::postcopy_readahead, uint64_t{1} << 30, Live::postcopy_readahead,
             "postcopy: after page requests in order, the push sends up to this many bytes past them at once, not held "
             "back by max-postcopy-bandwidth but counted against it (0 = none)"),
    };
}

std::vector<SettingRow> tls_and_deadline_rows() {
    return {
        credentials(text("tls-creds", &P::tls_creds,
             "tcp/unix: a directory of x509 credentials (QEMU's layout: ca-cert.pem, server-cert.pem, server-key.pem, "
             "client-cert.pem, client-key.pem): every connection of the migration is TLS 1.3, both sides authenticated; "
             "empty = plaintext")),
        text("tls-hostname", &P::tls_hostname,
             "source: the name the destination's certificate must carry (default: the URI's host)"),
        text("tls-authz", &P::tls_authz,
             "destination: the source certificates accepted, ';'-separated patterns matched against the distinguished "
             "name (CN=src,O=Lab) or, without '=', the common name (empty = any the CA signed)"),
        integer("x-tls-rekey-records", &P::tls_rekey_records, 1, uint64_t{1} << 24,
                "TLS: records a side sends under one key before it renews it (TLS 1.3 KeyUpdate; AES-GCM allows 2^24.5)"),
        checked(text("x-deadline", &P::deadline,
                     "source, precopy: the migration ends within this time of 'migrate' (30s, 90000ms, 5m, 2h, 1d; off = "
                     "none): as soon as the time left predicted (info migrate) misses it, x-deadline-strategy acts"),
                check_deadline),
        checked(text("x-deadline-strategy", &P::deadline_strategy,
                     "what x-deadline gives up first: cancel (end the migration now, the guest running on here; the "
                     "default), postcopy (switch now; needs postcopy-ram), downtime (raise downtime-limit as little as "
                     "ends it within 80 % of the time left, or else by the deadline, up to x-deadline-max-downtime), throttle (slow the vCPUs to the throttle that meets "
                     "it, and ease it when the plan is well ahead), dirty-limit (limit each vCPU's dirty rate so the guest dirties what meets it: only the "
                     "vCPUs over the limit slow down; needs --dirty-tracking ring), cheapest (downtime or throttle, whichever the "
                     "plan says costs the guest less: a pause its length, a throttle the share of the time left it "
                     "sleeps); or several in the order to try "
                     "them (downtime,throttle: the next acts where the one before cannot meet it); when none can, "
                     "it cancels, saying why"),
                check_deadline_strategy),
        integer("x-deadline-max-downtime", &P::deadline_max_downtime_ms, 1, 2000000,
                "x-deadline-strategy downtime (and cheapest): the longest pause it may raise downtime-limit to, ms"),
        integer("x-stall-timeout", &P::stall_timeout_ms, 0, 86400000,
                "source, precopy: when the data left has reached no new low for this long (ms; 0 = off, the "
                "default: vmm gives up on nothing by itself), the migration has stalled: an X_MIGRATION_STALLED "
                "event, and x-deadline-strategy acts (cancel by default, the guest running on here)"),
    };
}
}  // namespace

const std::vector<SettingRow>& setting_rows() {
    static const std::vector<SettingRow> k = [] {
        std::vector<SettingRow> all = capability_rows();
        for (auto* part : {parameter_rows, tls_and_deadline_rows}) {
            std::vector<SettingRow> more = part();
            all.insert(all.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
        }
        return all;
    }();
    return k;
}

void SharedSettings::publish() {
    for (const SettingRow& row : setting_rows())
        if (row.live) live_->set(*row.live, settings_.params.*(row.param));
}

const SettingRow* find_setting(std::string_view name) {
    const auto& rows = setting_rows();
    auto it = std::find_if(rows.begin(), rows.end(), [&](const SettingRow& r) { return r.name == name; });
    return it == rows.end() ? nullptr : &*it;
}

void Settings::declare_transport_setting(const TransportSetting& row) {
    if (find_setting(row.name) != nullptr || transport_row(row.name) != nullptr) return;
    transport_rows_.push_back(row);
}

// A name that is a row's but for QEMU's experimental "x-" (rdma-chunk-size, now x-rdma-chunk-size).
std::string Settings::did_you_mean(std::string_view name) const {
    std::string other = name.rfind("x-", 0) == 0 ? std::string(name.substr(2)) : "x-" + std::string(name);
    bool known = find_setting(other) != nullptr || transport_row(other) != nullptr;
    return known ? fmt::format(" (did you mean '{}'?)", other) : "";
}

const TransportSetting* Settings::transport_row(std::string_view name) const {
    auto it = std::find_if(transport_rows_.begin(), transport_rows_.end(), [&](const auto& r) { return r.name == name; });
    return it == transport_rows_.end() ? nullptr : &*it;
}

Status Settings::set_capability(std::string_view name, bool on) {
    if (const SettingRow* row = find_setting(name); row != nullptr && row->kind == Kind::capability) {
        caps.*(row->cap) = on;
        return {};
    }
    if (const TransportSetting* row = transport_row(name); row != nullptr && row->kind == TransportSetting::Kind::capability) {
        caps.transport[std::string(name)] = on;
        return {};
    }
    return Error(fmt::format("unknown migration capability '{}'{}; 'info migrate_capabilities' lists them", name,
                             did_you_mean(name)));
}

namespace {

// What a number must be: a row's bounds, whichever table it is in.
struct Bounds {
    bool size;  // takes k/m/g
    uint64_t min, max;
    bool power_of_two;
};

std::string range_text(const Bounds& b) {
    auto n = [&](uint64_t v) { return b.size ? format_size(v) : std::to_string(v); };
    if (b.max == UINT64_MAX) return b.min == 0 ? "" : fmt::format("at least {}", n(b.min));
    return fmt::format("{}from {} to {}", b.power_of_two ? "a power of two " : "", n(b.min), n(b.max));
}

// A row's value from the text typed: a size (k/m/g) or a plain integer, within the row's bounds.
Result<uint64_t> parse_value(std::string_view name, const Bounds& b, std::string_view value) {
    auto v = b.size ? parse_size(value) : parse_uint(value);
    bool fits = v && *v >= b.min && *v <= b.max && (!b.power_of_two || std::has_single_bit(*v));
    if (fits) return *v;
    if (b.size && !v) return Error(fmt::format("migration parameter '{}': {}", name, v.error().message()));
    return Error(fmt::format("migration parameter '{}' must be {}{}, got '{}'", name, b.size ? "" : "an integer ",
                             range_text(b), value));
}

Bounds bounds(const SettingRow& r) { return {r.kind == Kind::size, r.min, r.max, false}; }
Bounds bounds(const TransportSetting& r) {
    return {r.kind == TransportSetting::Kind::size, r.min, r.max, r.power_of_two};
}

}  // namespace

Status Settings::set_parameter(std::string_view name, std::string_view value) {
    if (const SettingRow* row = find_setting(name); row != nullptr && row->kind == Kind::text) {
        if (row->check != nullptr) {
            if (auto s = row->check(value); !s) return s;
        }
        params.*(row->text) = std::string(value);
        return {};
    }
    if (const SettingRow* row = find_setting(name); row != nullptr && row->kind != Kind::capability) {
        auto v = parse_value(name, bounds(*row), value);
        if (!v) return v.error();
        params.*(row->param) = *v;
        return {};
    }
    if (const TransportSetting* row = transport_row(name); row != nullptr && row->kind != TransportSetting::Kind::capability) {
        if (row->kind == TransportSetting::Kind::text) {
            params.transport[std::string(name)] = std::string(value);
            return {};
        }
        auto v = parse_value(name, bounds(*row), value);
        if (!v) return v.error();
        params.transport[std::string(name)] = std::to_string(*v);
        return {};
    }
    return Error(fmt::format("unknown migration parameter '{}'{}; 'info migrate_parameters' lists them", name,
                             did_you_mean(name)));
}

std::vector<std::pair<std::string, bool>> Settings::capability_list() const {
    std::vector<std::pair<std::string, bool>> out;
    for (const SettingRow& row : setting_rows())
        if (row.kind == Kind::capability) out.emplace_back(row.name, caps.*(row.cap));
    for (const auto& row : transport_rows_) {
        if (row.kind != TransportSetting::Kind::capability) continue;
        auto it = caps.transport.find(row.name);
        out.emplace_back(row.name, it != caps.transport.end() ? it->second : row.fallback != 0);
    }
    return out;
}

std::vector<std::pair<std::string, std::string>> Settings::parameter_list() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const SettingRow& row : setting_rows())
        if (row.kind == Kind::text) out.emplace_back(row.name, params.*(row.text));
        else if (row.kind != Kind::capability) out.emplace_back(row.name, std::to_string(params.*(row.param)));
    for (const auto& row : transport_rows_) {
        if (row.kind == TransportSetting::Kind::capability) continue;
        auto it = params.transport.find(row.name);
        std::string fallback = row.kind == TransportSetting::Kind::text ? "" : std::to_string(row.fallback);
        out.emplace_back(row.name, it != params.transport.end() ? it->second : fallback);
    }
    return out;
}

std::vector<Settings::Described> Settings::describe() const {
    static constexpr const char* kKinds[] = {"capability", "integer", "size", "text"};
    std::vector<Described> out;
    auto caps_now = capability_list();
    auto params_now = parameter_list();
    auto value_of = [&](const std::string& name) -> std::string {
        for (const auto& [n, on] : caps_now)
            if (n == name) return on ? "on" : "off";
        for (const auto& [n, v] : params_now)
            if (n == name) return v;
        return "";
    };
    for (const SettingRow& r : setting_rows()) {
        std::string name(r.name);
        bool number = r.kind == Kind::integer || r.kind == Kind::size;
        out.push_back({name, kKinds[static_cast<int>(r.kind)], value_of(name), number ? range_text(bounds(r)) : "",
                       std::string(r.help), r.live.has_value()});
    }
    for (const auto& r : transport_rows_) {
        bool number = r.kind == TransportSetting::Kind::integer || r.kind == TransportSetting::Kind::size;
        out.push_back({r.name, kKinds[static_cast<int>(r.kind)], value_of(r.name), number ? range_text(bounds(r)) : "",
                       r.help, false});
    }
    return out;
}

}  // namespace vmm::migration

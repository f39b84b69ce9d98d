#include "vmm/migration/session/params.h"

#include <fmt/format.h>

#include <algorithm>

#include "vmm/common/units.h"

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

// The row, marked as one a transport's listener is given.
SettingRow listener(SettingRow row) {
    row.listener_reads = true;
    return row;
}

}  // namespace

const std::vector<SettingRow>& setting_rows() {
    static const std::vector<SettingRow> k = {
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
                "source, tcp/unix precopy: when the link breaks, both sides wait this long (ms) in precopy-paused while "
                "the source reconnects by itself (or 'migrate -r URI' / 'migrate_recover URI' name another way), then "
                "go on from where they were; 0 = the migration fails at once"),
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
        text("tls-creds", &P::tls_creds,
             "tcp/unix: a directory of x509 credentials (QEMU's layout: ca-cert.pem, server-cert.pem, server-key.pem, "
             "client-cert.pem, client-key.pem): every connection of the migration is TLS 1.3, both sides authenticated; "
             "empty = plaintext"),
        text("tls-hostname", &P::tls_hostname,
             "source: the name the destination's certificate must carry (default: the URI's host)"),
        text("tls-authz", &P::tls_authz,
             "destination: the source certificates accepted, ';'-separated patterns matched against the distinguished "
             "name (CN=src,O=Lab) or, without '=', the common name (empty = any the CA signed)"),
        integer("x-tls-rekey-records", &P::tls_rekey_records, 1, uint64_t{1} << 24,
                "TLS: records a side sends under one key before it renews it (TLS 1.3 KeyUpdate; AES-GCM allows 2^24.5)"),
    };
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

void Settings::declare_transport_capability(std::string name) {
    if (std::find(transport_caps_.begin(), transport_caps_.end(), name) == transport_caps_.end())
        transport_caps_.push_back(std::move(name));
}

void Settings::declare_transport_parameter(std::string name) {
    if (std::find(transport_params_.begin(), transport_params_.end(), name) == transport_params_.end())
        transport_params_.push_back(std::move(name));
}

Status Settings::set_capability(std::string_view name, bool on) {
    if (const SettingRow* row = find_setting(name); row != nullptr && row->kind == Kind::capability) {
        caps.*(row->cap) = on;
        return {};
    }
    if (std::find(transport_caps_.begin(), transport_caps_.end(), name) != transport_caps_.end()) {
        caps.transport[std::string(name)] = on;
        return {};
    }
    return Error(fmt::format("unknown migration capability '{}'; 'info migrate_capabilities' lists them", name));
}

// A row's value from the text typed: a size (k/m/g) or a plain integer, within the row's bounds.
static Result<uint64_t> parse_value(const SettingRow& row, std::string_view value) {
    if (row.kind == Kind::size) {
        auto v = parse_size(value);
        if (!v) return Error(fmt::format("migration parameter '{}': {}", row.name, v.error().message()));
        if (*v > row.max) return Error(fmt::format("migration parameter '{}': {} is more than {} bytes", row.name, value, row.max));
        return *v;
    }
    auto v = parse_uint(value);
    if (!v || *v < row.min || *v > row.max) {
        return Error(fmt::format("migration parameter '{}' must be an integer from {} to {}, got '{}'", row.name, row.min,
                                 row.max, value));
    }
    return *v;
}

Status Settings::set_parameter(std::string_view name, std::string_view value) {
    if (const SettingRow* row = find_setting(name); row != nullptr && row->kind == Kind::text) {
        params.*(row->text) = std::string(value);
        return {};
    }
    if (const SettingRow* row = find_setting(name); row != nullptr && row->kind != Kind::capability) {
        auto v = parse_value(*row, value);
        if (!v) return v.error();
        params.*(row->param) = *v;
        return {};
    }
    if (std::find(transport_params_.begin(), transport_params_.end(), name) != transport_params_.end()) {
        params.transport[std::string(name)] = std::string(value);
        return {};
    }
    return Error(fmt::format("unknown migration parameter '{}'; 'info migrate_parameters' lists them", name));
}

std::vector<std::pair<std::string, bool>> Settings::capability_list() const {
    std::vector<std::pair<std::string, bool>> out;
    for (const SettingRow& row : setting_rows())
        if (row.kind == Kind::capability) out.emplace_back(row.name, caps.*(row.cap));
    for (const auto& n : transport_caps_) {
        auto it = caps.transport.find(n);
        out.emplace_back(n, it != caps.transport.end() && it->second);
    }
    return out;
}

std::vector<std::pair<std::string, std::string>> Settings::parameter_list() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const SettingRow& row : setting_rows())
        if (row.kind == Kind::text) out.emplace_back(row.name, params.*(row.text));
        else if (row.kind != Kind::capability) out.emplace_back(row.name, std::to_string(params.*(row.param)));
    for (const auto& n : transport_params_) {
        auto it = params.transport.find(n);
        out.emplace_back(n, it != params.transport.end() ? it->second : "");
    }
    return out;
}

}  // namespace vmm::migration

#include "vmm/monitor/migration_commands.h"

#include <fmt/format.h>

#include <thread>

#include "vmm/common/units.h"
#include "vmm/monitor/client/json_access.h"
#include "vmm/monitor/plan_command.h"
#include "vmm/monitor/pull_commands.h"

namespace vmm::monitor {

using migration::MigrationStatus;

namespace {
Json latency_json(const migration::LatencySummary& l) {
    return Json{{"count", l.count}, {"p50-us", l.p50_us}, {"p99-us", l.p99_us}, {"max-us", l.max_us}};
}

std::string latency_text(const Json& l) {
    return fmt::format("p50 {:.1f} us, p99 {:.1f} us, max {:.1f} us", num(l, "p50-us"), num(l, "p99-us"), num(l, "max-us"));
}

Json postcopy_json(const migration::PostcopyStats& p) {
    Json blocktime = Json::array();
    for (double ms : p.vcpu_blocktime_ms) blocktime.push_back(static_cast<uint64_t>(ms * 1000));  // µs
    return Json{{"switch-ms", p.switch_ms},           {"missing-pages", p.missing_pages},
                {"background-pages", p.background_pages}, {"requests", p.requests},
                {"requests-served", p.requests_served}, {"requests-already-sent", p.already_sent},
                {"x-preempt-pages", p.preempt_pages},     {"x-readahead-pages", p.readahead_pages},
                {"x-resent-pages", p.resent_pages},
                {"zero-local", p.zero_local},         {"placed", p.placed},
                {"bytes", p.postcopy_bytes},          {"recoveries", p.recoveries},
                {"x-return-path-cpu-ms", p.return_cpu_ms}, {"x-source-cpu-ms", p.source_cpu_ms}, {"x-held-pages", p.held_pages},
                {"fault-latency", latency_json(p.fault_latency)}, {"x-serve-latency", latency_json(p.serve_latency)},
                {"blocktime-ms", p.blocktime_ms},     {"vcpu-blocktime-us", std::move(blocktime)},
                {"x-ready-ms", p.ready_ms}};
}

std::string postcopy_text(const Json& p, bool destination) {
    std::string out;
    if (!destination) {
        out += fmt::format("postcopy switch: {} ms\npostcopy missing pages: {}\npostcopy pushed: {} pages\n",
                           u64(p, "switch-ms"), u64(p, "missing-pages"), u64(p, "background-pages"));
        out += fmt::format("postcopy requests: {} ({} served first, {} already on their way)\npostcopy bytes: {} kbytes\n",
                           u64(p, "requests"), u64(p, "requests-served"), u64(p, "requests-already-sent"),
                           u64(p, "bytes") / 1024);
        out += fmt::format("postcopy recoveries: {}\n", u64(p, "recoveries"));
        out += fmt::format("postcopy return path cpu: {:.1f} ms\n", num(p, "x-return-path-cpu-ms"));
        out += fmt::format("postcopy source cpu: {:.1f} ms (the whole process, from the switch)\n", num(p, "x-source-cpu-ms"));
        if (u64(p, "x-held-pages") != 0) {
            out += fmt::format("postcopy pages the destination read itself (not pushed): {}\n", u64(p, "x-held-pages"));
        }
        if (u64(p, "x-preempt-pages") != 0) out += fmt::format("postcopy preempt pages: {}\n", u64(p, "x-preempt-pages"));
        out += fmt::format("postcopy readahead pages: {}\n", u64(p, "x-readahead-pages"));
        if (u64(p, "x-resent-pages") != 0) {
            out += fmt::format("postcopy pages sent again on the preempt connection: {}\n", u64(p, "x-resent-pages"));
        }
        const Json& serve = child(p, "x-serve-latency");
        if (u64(serve, "count") != 0) {
            out += fmt::format("postcopy serve latency: {} ({} requests, read until their pages were written)\n",
                               latency_text(serve), u64(serve, "count"));
        }
        return out;
    }
    const Json& l = child(p, "fault-latency");
    if (num(p, "x-ready-ms") > 0) out += fmt::format("lazy restore ready: {:.1f} ms (the guest could run)\n", num(p, "x-ready-ms"));
    out += fmt::format("postcopy missing pages: {} ({} placed)\npostcopy requests: {}\n", u64(p, "missing-pages"),
                       u64(p, "placed"), u64(p, "requests"));
    out += fmt::format("postcopy zero pages placed without asking: {}\npostcopy recoveries: {}\n", u64(p, "zero-local"),
                       u64(p, "recoveries"));
    if (u64(p, "x-preempt-pages") != 0) out += fmt::format("postcopy preempt pages: {}\n", u64(p, "x-preempt-pages"));
    out += fmt::format("postcopy fault latency: {} ({} answered)\n", latency_text(l), u64(l, "count"));
    std::string per;
    for (const auto& v : child(p, "vcpu-blocktime-us"))
        per += fmt::format("{}{:.1f}", per.empty() ? "" : " ", static_cast<double>(as_uint(v).value_or(0)) / 1000);
    out += fmt::format("postcopy blocktime: {:.1f} ms (all vCPUs at once), per vCPU: {} ms\n", num(p, "blocktime-ms"), per);
    return out;
}

// [{"name": "connect", "ms": 12.5, "parts": [the transport's steps within it]}, ...]
Json setup_parts_json(const std::vector<migration::SetupPart>& parts) {
    Json out = Json::array();
    for (const auto& p : parts) {
        Json one{{"name", p.name}, {"ms", p.ms}};
        if (!p.parts.empty()) one["parts"] = setup_parts_json(p.parts);
        out.push_back(std::move(one));
    }
    return out;
}

// "start 0.1, connect 12.5 (address 1.0, route 0.9, ...), header 3.0": read back from the JSON,
// whoever wrote it.
std::string setup_parts_text(const Json& parts) {
    std::string out;
    if (!parts.is_array()) return out;
    for (const Json& p : parts) {
        out += fmt::format("{}{} {:.1f}", out.empty() ? "" : ", ", str(p, "name"), num(p, "ms"));
        if (p.contains("parts")) out += " (" + setup_parts_text(child(p, "parts")) + ")";
    }
    return out;
}

// query-migrate's "ram": QEMU's members, and ours with x-.
Json ram_json(const migration::MigrationStats& s) {
    const auto& r = s.ram;
    Json ram = Json{{"transferred", r.transferred},       {"x-in-flight", r.in_flight},
                    {"remaining", r.remaining},
                    {"total", r.total},                   {"duplicate", r.duplicate},
                    {"normal", r.normal},                 {"normal-bytes", r.normal_bytes},
                    {"dirty-pages-rate", r.dirty_pages_rate}, {"mbps", r.mbps},
                    {"dirty-sync-count", r.dirty_sync_count}, {"pages-per-second", r.pages_per_second},
                    {"precopy-bytes", r.precopy_bytes},   {"downtime-bytes", r.downtime_bytes},
                    // QEMU's names for what x-postcopy details (libvirt reads postcopy-requests)
                    {"postcopy-requests", s.postcopy.requests}, {"postcopy-bytes", s.postcopy.postcopy_bytes},
                    {"x-skipped-unpopulated", r.skipped_unpopulated},
                    {"x-populate-announced", r.populate_announced}, {"x-populated-ahead", r.populated_ahead}};
    if (r.verified_bytes != 0) {  // a destination under verify-ram
        ram["x-verified"] = r.verified_bytes;
        ram["x-verify-mismatches"] = r.verify_mismatches;
        if (r.verified_in_round) ram["x-verified-after-round"] = r.verified_after_round;
    }
    return ram;
}

}  // namespace

Json migration_stats_json(const migration::MigrationStats& s, const devices::GuestReport& guest) {
    Json j{{"status", migration::to_string(s.status)}};
    if (s.status == MigrationStatus::none) return j;
    j["total-time"] = s.total_time_ms;
    j["setup-time"] = s.setup_time_ms;
    if (!s.setup_parts.empty()) j["x-setup-parts"] = setup_parts_json(s.setup_parts);
    j["expected-downtime"] = s.expected_downtime_ms;
    if (s.handover_estimate_ms > 0) j["x-handover-estimate-ms"] = s.handover_estimate_ms;
    if (s.status == MigrationStatus::completed) j["downtime"] = s.downtime_ms;
    if (const auto& d = s.downtime_parts; s.status == MigrationStatus::completed && (d.last_round > 0 || d.state > 0)) {  // the source's
        j["x-downtime-parts"] = Json{{"pause", d.pause}, {"last-round", d.last_round}, {"state", d.state},
                                     {"destination", d.destination}, {"go", d.go}};
    }
    j["cpu-throttle-percentage"] = s.cpu_throttle_percentage;
    if (s.eta) {  // the time left as predicted now (core/eta.h)
        j["x-converges"] = s.eta->converges;
        if (s.eta->converges) j["x-expected-remaining-ms"] = static_cast<uint64_t>(s.eta->remaining_ms);
        j["x-eta-rates"] = Json{{"link-bytes-per-s", static_cast<uint64_t>(s.eta_link_bytes_per_s)},
                                {"dirty-bytes-per-s", static_cast<uint64_t>(s.eta_dirty_bytes_per_s)},
                                {"rounds", s.eta->rounds}};
    }
    j["x-rounds"] = s.rounds;
    if (s.tls_key_updates) j["x-tls-key-updates"] = *s.tls_key_updates;
    if (s.stalls != 0) j["x-stalls"] = s.stalls;
    if (s.precopy_resumes != 0 || s.status == MigrationStatus::precopy_paused) {
        j["x-precopy-resumes"] = s.precopy_resumes;
        j["x-precopy-paused-ms"] = s.precopy_paused_ms;
        j["x-precopy-resent-pages"] = s.resent_pages;
    }
    if (s.ways.size() > 1) {
        Json ways = Json::array();
        for (const auto& w : s.ways) ways.push_back(Json{{"uri", w.uri}, {"bytes", w.bytes}});
        j["x-ways"] = std::move(ways);
    }
    if (!s.error.empty()) j["error-desc"] = s.error;
    Json rounds = Json::array();
    for (const auto& rd : s.round_log) {
        rounds.push_back(Json{{"round", rd.round}, {"bytes", rd.bytes}, {"seconds", rd.seconds}, {"dirty-after", rd.dirty_after}});
    }
    j["x-round-log"] = std::move(rounds);
    // From the guest: the longest pause it reported, and from its clock reads the pause across
    // the switchover and its longest stall while the migration ran before it.
    auto ms = [](uint64_t ns) { return static_cast<double>(ns) / 1e6; };
    if (guest.max_pause_ns != 0) j["x-guest-max-pause-ms"] = ms(guest.max_pause_ns);
    if (guest.switchover_pause_ns != 0) j["x-guest-switchover-pause-ms"] = ms(guest.switchover_pause_ns);
    if (guest.migration_stall_ns != 0) j["x-guest-migration-stall-ms"] = ms(guest.migration_stall_ns);
    if (guest.postcopy_stall_ns != 0) j["x-guest-postcopy-stall-ms"] = ms(guest.postcopy_stall_ns);
    j["ram"] = ram_json(s);
    if (s.postcopy.switched) j["x-postcopy"] = postcopy_json(s.postcopy);
    if (!s.postcopy.vcpu_blocktime_ms.empty()) {  // a destination: QEMU's names
        j["postcopy-blocktime"] = static_cast<uint64_t>(s.postcopy.blocktime_ms);
        Json per = Json::array();
        for (double v : s.postcopy.vcpu_blocktime_ms) per.push_back(static_cast<uint64_t>(v));
        j["postcopy-vcpu-blocktime"] = std::move(per);
    }
    return j;
}

// "expected remaining: ..." from x-converges, x-expected-remaining-ms and x-eta-rates.
static std::string eta_text(const Json& j) {
    if (!j.contains("x-converges")) return "";
    const Json& r = child(j, "x-eta-rates");
    double link = num(r, "link-bytes-per-s") / 1e6, dirty = num(r, "dirty-bytes-per-s") / 1e6;
    if (str(j, "status") == "postcopy-active") {
        return fmt::format("expected remaining: {:.1f} s (the missing pages at the push's {:.1f} MB/s)\n",
                           num(j, "x-expected-remaining-ms") / 1000, link);
    }
    if (!flag(j, "x-converges")) {
        return fmt::format("expected remaining: no end at these rates (the guest dirties {:.1f} MB/s, the link moves {:.1f} "
                           "MB/s): auto-converge, postcopy or a higher downtime-limit would end it\n",
                           dirty, link);
    }
    return fmt::format("expected remaining: {:.1f} s ({} round(s) before the last pause; the link moves {:.1f} MB/s, "
                       "the guest dirties {:.1f} MB/s)\n",
                       num(j, "x-expected-remaining-ms") / 1000, u64(r, "rounds"), link, dirty);
}

// What the guest saw: its pause across the switchover, its longest stalls and pause.
static std::string guest_seen_text(const Json& j) {
    std::string out;
    if (j.contains("x-guest-switchover-pause-ms")) {
        out += fmt::format("guest-observed pause: {:.1f} ms\n", num(j, "x-guest-switchover-pause-ms"));
    }
    if (j.contains("x-guest-migration-stall-ms")) {
        out += fmt::format("guest's longest stall before the switchover: {:.1f} ms\n", num(j, "x-guest-migration-stall-ms"));
    }
    if (j.contains("x-guest-postcopy-stall-ms")) {
        out += fmt::format("guest's longest stall in postcopy: {:.1f} ms\n", num(j, "x-guest-postcopy-stall-ms"));
    }
    if (j.contains("x-guest-max-pause-ms")) {
        out += fmt::format("guest's longest pause reported: {:.1f} ms\n", num(j, "x-guest-max-pause-ms"));
    }
    return out;
}

// The RAM's lines of 'info migrate'.
static std::string ram_text(const Json& j) {
    const Json& r = child(j, "ram");
    auto kb = [&](const char* k) { return u64(r, k) / 1024; };
    std::string out;
    out += fmt::format("transferred ram: {} kbytes\n", kb("transferred"));
    if (u64(r, "x-in-flight") != 0) out += fmt::format("in flight ram: {} kbytes\n", kb("x-in-flight"));
    out += fmt::format("throughput: {:.2f} mbps\nremaining ram: {} kbytes\n", num(r, "mbps"), kb("remaining"));
    out += fmt::format("total ram: {} kbytes\nduplicate: {} pages\nnormal: {} pages\nnormal bytes: {} kbytes\n", kb("total"),
                       u64(r, "duplicate"), u64(r, "normal"), kb("normal-bytes"));
    out += fmt::format("unpopulated (skipped): {} pages\ndirty sync count: {}\ndirty pages rate: {:.0f} pages/s\n",
                       u64(r, "x-skipped-unpopulated"), u64(r, "dirty-sync-count"),
                       num(r, "dirty-pages-rate"));
    if (u64(r, "x-populate-announced") != 0) {  // a destination that prepared RAM ahead
        out += fmt::format("populated ahead: {} of {} kbytes announced\n", kb("x-populated-ahead"), kb("x-populate-announced"));
    }
    if (u64(r, "x-verified") != 0) {  // a destination under verify-ram
        out += fmt::format("verified ram: {} kbytes against the source's checksums ({} pages sent again after a mismatch)\n",
                           kb("x-verified"), u64(r, "x-verify-mismatches"));
        if (r.contains("x-verified-after-round")) {  // checked as the RAM channel delivered the sums
            out += fmt::format("verified after its round ended: {} kbytes (the rest while the rounds ran)\n",
                               kb("x-verified-after-round"));
        }
    }
    out += fmt::format("precopy ram: {} kbytes\ndowntime ram: {} kbytes\ncpu throttle percentage: {}\n", kb("precopy-bytes"),
                       kb("downtime-bytes"), u64(j, "cpu-throttle-percentage"));
    return out;
}

std::string migration_stats_text(const Json& j) {
    std::string out = fmt::format("Migration status: {}\n", str(j, "status"));
    if (!j.contains("ram")) return out;
    if (j.contains("error-desc")) out += fmt::format("error: {}\n", str(j, "error-desc"));
    out += fmt::format("total time: {} ms\n", u64(j, "total-time"));
    if (j.contains("downtime")) out += fmt::format("downtime: {} ms\n", u64(j, "downtime"));
    if (j.contains("x-downtime-parts")) {
        const Json& d = child(j, "x-downtime-parts");
        out += fmt::format("downtime parts: pause {:.1f}, last round {:.1f}, state {:.1f}, destination {:.1f}, go {:.1f} ms\n",
                           num(d, "pause"), num(d, "last-round"), num(d, "state"),
                           num(d, "destination"), num(d, "go"));
    }
    if (!j.contains("downtime")) out += fmt::format("expected downtime: {} ms\n", u64(j, "expected-downtime"));
    out += eta_text(j);
    if (j.contains("x-handover-estimate-ms")) {
        out += fmt::format("hand-over estimate: {:.1f} ms (the destination saved and loaded its own state)\n",
                           num(j, "x-handover-estimate-ms"));
    }
    out += guest_seen_text(j);
    out += fmt::format("setup: {} ms\n", u64(j, "setup-time"));
    if (j.contains("x-setup-parts")) out += fmt::format("setup parts: {} ms\n", setup_parts_text(child(j, "x-setup-parts")));
    out += fmt::format("rounds: {}\n", u64(j, "x-rounds"));
    if (j.contains("x-tls-key-updates")) out += fmt::format("tls key updates: {}\n", u64(j, "x-tls-key-updates"));
    if (j.contains("x-stalls")) out += fmt::format("stalls: {} (x-stall-timeout passed with no progress)\n", u64(j, "x-stalls"));
    if (j.contains("x-precopy-resumes")) {
        out += fmt::format("precopy resumes: {} (paused {:.0f} ms in all; {} pages sent again)\n", u64(j, "x-precopy-resumes"),
                           num(j, "x-precopy-paused-ms"), u64(j, "x-precopy-resent-pages"));
    }
    if (auto it = j.find("x-ways"); it != j.end() && it->is_array()) {
        std::string ways;
        for (const auto& w : *it) {
            if (!w.is_object()) continue;
            ways += fmt::format("{}{} {} kbytes", ways.empty() ? "" : ", then ", str(w, "uri"), u64(w, "bytes") >> 10);
        }
        out += "ways: " + ways + "\n";
    }
    out += ram_text(j);
    if (j.contains("x-postcopy")) out += postcopy_text(child(j, "x-postcopy"), j.contains("postcopy-blocktime"));
    return out;
}

std::string round_log_text(const Json& j) {
    const Json& log = child(j, "x-round-log");
    if (!log.is_array() || log.empty()) return "no RAM round yet\n";
    std::string out = fmt::format("{:>6} {:>14} {:>10} {:>10} {:>12}\n", "round", "bytes", "ms", "MB/s", "dirty after");
    for (const Json& r : log) {
        double secs = num(r, "seconds");
        uint64_t bytes = u64(r, "bytes");
        out += fmt::format("{:>6} {:>14} {:>10.1f} {:>10.1f} {:>12}\n", u64(r, "round"), bytes, secs * 1e3,
                           secs > 0 ? static_cast<double>(bytes) / secs / 1e6 : 0.0, u64(r, "dirty-after"));
    }
    return out;
}

std::string progress_line(const Json& j) {
    std::string status = str(j, "status");
    if (!j.contains("ram")) return fmt::format("\r{:<78}", status);
    const Json& r = child(j, "ram");
    double total = static_cast<double>(u64(r, "total"));
    double done = static_cast<double>((u64(r, "normal") + u64(r, "duplicate") +
                                       u64(r, "x-skipped-unpopulated")) *
                                      4096);
    int pct = status == "completed" ? 100 : std::min(99, static_cast<int>(total > 0 ? done * 100 / total : 0));
    int bars = pct / 5;
    uint64_t in_flight = u64(r, "x-in-flight");
    std::string moved = format_size(u64(r, "transferred"));
    moved += in_flight != 0 ? " arrived, " + format_size(in_flight) + " in flight" : " sent";
    std::string line = fmt::format("[{}{}] {:3}%  {}  {:.0f} Mbps  round {}  {}", std::string(static_cast<size_t>(bars), '#'),
                                   std::string(static_cast<size_t>(20 - bars), '-'), pct, moved, num(r, "mbps"),
                                   u64(j, "x-rounds"), status);
    return fmt::format("\r{:<96}", line);  // padded: it overwrites a longer line before it
}

namespace {

// A foreground migrate (or migrate -r) followed to its end, or back to postcopy-paused with the
// reason on the last line.
void follow_migration(const std::function<Json()>& query, const Json& args,
                      const std::function<bool(const std::string&)>& write) {
    // A resume in the foreground is followed as a migration is: to its end, or back to
    // postcopy-paused with the reason on the last line.
    if (flag(args, "detach")) return;
    for (;;) {
        Json j = query();
        if (!write(progress_line(j))) return;
        std::string st = str(j, "status");
        if (st == "completed" || st == "failed" || st == "cancelled" || st == "none" || st == "postcopy-paused") {
            write("\n" + migration_stats_text(j));
            // The last line says the migration did not happen, so that a script (vmmctl's
            // exit status) can tell, as with any failed command.
            if (st == "failed") write("Error: migration failed: " + str(j, "error-desc", "no reason recorded") + "\n");
            if (st == "cancelled") write("Error: migration cancelled\n");
            if (st == "postcopy-paused") {
                write("Error: postcopy paused: " + str(j, "error-desc", "no reason recorded") +
                      " ('migrate_recover URI' on the destination, then 'migrate -r URI' here, resumes it)\n");
            }
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
}

void add_outgoing(CommandTable& t, migration::MigrationManager& mgr, machine::Machine& m) {
    auto query = [&mgr, &m] { return migration_stats_json(mgr.query(), m.control().report()); };
    Command migrate{"migrate", "migrate",
                    {{"detach", ArgType::flag, true, "-d"}, {"resume", ArgType::flag, true, "-r"}, {"uri", ArgType::string}},
                    "live-migrate the VM to URI (tcp:HOST:PORT, unix:PATH, rdma:HOST:PORT, file:PATH); -d: do not wait; "
                    "-r: resume a migration whose link broke: a postcopy to the destination's migrate_recover URI, a "
                    "precopy (precopy-paused) by trying URI instead of its own (waits, as a migration does, unless -d)",
                    [&mgr](const Json& a) -> Result<Json> {
                        auto s = flag(a, "resume") ? mgr.resume(str(a, "uri")) : mgr.migrate(str(a, "uri"));
                        if (!s) return s.error();
                        return Json::object();
                    },
                    {}};
    migrate.follow = [query](const Json& args, const std::function<bool(const std::string&)>& write) {
        follow_migration(query, args, write);
    };
    t.add(std::move(migrate));
    t.add({"migrate_cancel", "migrate-cancel", {}, "cancel the migration in progress (the VM keeps running)",
           [&mgr](const Json&) -> Result<Json> {
               if (auto s = mgr.cancel(); !s) return s.error();
               return Json::object();
           },
           {}});
    t.add({"migrate_start_postcopy", "migrate-start-postcopy", {},
           "switch the migration under way to postcopy now: the round under way stops after its current piece (needs postcopy-ram on both sides)",
           [&mgr](const Json&) -> Result<Json> {
               if (auto s = mgr.start_postcopy(); !s) return s.error();
               return Json::object();
           },
           {}});
    t.add({"migrate_pause", "migrate-pause", {},
           "cut the link of the migration under way, as a failed network would: a postcopy's (either side) waits in "
           "postcopy-paused; a precopy's over tcp/unix (the source) in precopy-paused while the source reconnects "
           "(x-resume-window)",
           [&mgr](const Json&) -> Result<Json> {
               if (auto s = mgr.pause(); !s) return s.error();
               return Json::object();
           },
           {}});
    t.add({"info migrate", "query-migrate", {}, "migration status and statistics",
           [query](const Json&) -> Result<Json> { return query(); }, migration_stats_text});
    t.add({"info migrate-rounds", "", {}, "each RAM round of the last migration: bytes, time, throughput",
           [query](const Json&) -> Result<Json> { return query(); }, round_log_text});
}

// Setting capabilities and parameters, HMP's one at a time and QMP's several at once.
void add_settings(CommandTable& t, migration::MigrationManager& mgr) {
    t.add({"migrate_set_capability", "", {{"capability", ArgType::string}, {"state", ArgType::boolean}},
           "turn a migration capability on or off", [&mgr](const Json& a) -> Result<Json> {
               if (auto s = mgr.set_capability(str(a, "capability"), flag(a, "state")); !s) return s.error();
               return Json::object();
           }, {}});
    Command caps{"", "migrate-set-capabilities", {{"capabilities", ArgType::json}}, "set capabilities",
                 [&mgr](const Json& a) -> Result<Json> {
                     const Json& list = child(a, "capabilities");
                     if (!list.is_array()) return Error("'capabilities' must be an array");
                     for (const auto& c : list) {
                         auto name = string_member(c, "capability");
                         auto state = bool_member(c, "state");
                         if (!name || !state) {
                             return Error("each capability must be {\"capability\": NAME, \"state\": true|false}");
                         }
                         if (auto s = mgr.set_capability(*name, *state); !s) return s.error();
                     }
                     return Json::object();
                 },
                 {}};
    t.add(std::move(caps));
    t.add({"migrate_set_parameter", "", {{"parameter", ArgType::string}, {"value", ArgType::string}},
           "set a migration parameter (e.g. max-bandwidth 40g, downtime-limit 50)", [&mgr](const Json& a) -> Result<Json> {
               if (auto s = mgr.set_parameter(str(a, "parameter"), str(a, "value")); !s) return s.error();
               return Json::object();
           }, {}});
    Command params{"", "migrate-set-parameters", {}, "set parameters: {\"max-bandwidth\": 1073741824, ...}",
                   [&mgr](const Json& a) -> Result<Json> {
                       for (const auto& [k, v] : a.items()) {
                           auto text = as_string(v);
                           if (auto n = as_uint(v)) text = std::to_string(*n);
                           if (!text) return Error("parameter '" + k + "' must be a string or a non-negative integer");
                           if (auto s = mgr.set_parameter(k, *text); !s) return s.error();
                       }
                       return Json::object();
                   },
                   {}};
    params.any_args = true;
    t.add(std::move(params));
}

// The settings as they are: capabilities, parameters, and every setting explained.
void add_setting_queries(CommandTable& t, migration::MigrationManager& mgr) {
    t.add({"info migrate_capabilities", "query-migrate-capabilities", {}, "migration capabilities",
           [&mgr](const Json&) -> Result<Json> {
               Json out = Json::array();
               for (const auto& [n, on] : mgr.settings().capability_list()) out.push_back({{"capability", n}, {"state", on}});
               return out;
           },
           [](const Json& j) {
               std::string out;
               for (const auto& c : j) out += fmt::format("{}: {}\n", str(c, "capability"), flag(c, "state") ? "on" : "off");
               return out;
           }});
    t.add({"info migrate_settings", "x-query-migrate-settings", {},
           "every migration setting: its kind, value, range and what it does (transports' too, once used)",
           [&mgr](const Json&) -> Result<Json> {
               Json out = Json::array();
               for (const auto& d : mgr.settings().describe()) {
                   out.push_back({{"name", d.name}, {"kind", d.kind}, {"value", d.value}, {"range", d.range},
                                  {"live", d.live}, {"help", d.help}});
               }
               return out;
           },
           [](const Json& j) {
               std::string out;
               for (const auto& d : j) {
                   std::string range = str(d, "range");
                   out += fmt::format("{} = {}   ({}{}{})\n    {}\n", str(d, "name"), str(d, "value"), str(d, "kind"),
                                      range.empty() ? "" : ", " + range, flag(d, "live") ? ", live" : "", str(d, "help"));
               }
               return out;
           }});
    t.add({"info migrate_parameters", "query-migrate-parameters", {}, "migration parameters",
           [&mgr](const Json&) -> Result<Json> {
               Json out = Json::object();
               for (const auto& [n, v] : mgr.settings().parameter_list()) out[n] = v;
               return out;
           },
           [](const Json& j) {
               std::string out;
               for (const auto& [k, v] : j.items()) out += fmt::format("{}: {}\n", k, as_string(v).value_or(to_text(v)));
               return out;
           }});
}

}  // namespace

void add_migration_commands(CommandTable& t, migration::MigrationManager& mgr, machine::Machine& m,
                            std::function<void(const Error&)> on_incoming_failure) {
    add_outgoing(t, mgr, m);
    add_settings(t, mgr);
    add_setting_queries(t, mgr);
    t.add({"migrate_incoming", "migrate-incoming", {{"uri", ArgType::string}},
           "start listening for the migration deferred with --incoming defer",
           [&mgr, &m, fail = std::move(on_incoming_failure)](const Json& a) -> Result<Json> {
               if (!mgr.incoming_deferred()) return Error("this vmm was not started with --incoming defer");
               bool stay_paused = m.spec().start_paused;
               if (auto s = mgr.incoming(str(a, "uri"), stay_paused, fail); !s) return s.error();
               return Json::object();
           },
           {}});
    t.add({"migrate_recover", "migrate-recover", {{"uri", ArgType::string}},
           "destination of a postcopy whose link broke: listen on URI for the source's 'migrate -r URI'",
           [&mgr](const Json& a) -> Result<Json> {
               if (auto s = mgr.recover(str(a, "uri")); !s) return s.error();
               return Json::object();
           },
           {}});
    add_plan_command(t, mgr, m);
    add_pull_commands(t, mgr);
}

}  // namespace vmm::monitor

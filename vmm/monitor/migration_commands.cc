#include "vmm/monitor/migration_commands.h"

#include <fmt/format.h>

#include <thread>

#include "vmm/common/units.h"

namespace vmm::monitor {

using migration::MigrationStatus;

Json migration_stats_json(const migration::MigrationStats& s, const devices::GuestReport& guest) {
    Json j{{"status", migration::to_string(s.status)}};
    if (s.status == MigrationStatus::none) return j;
    const auto& r = s.ram;
    j["total-time"] = s.total_time_ms;
    j["setup-time"] = s.setup_time_ms;
    j["expected-downtime"] = s.expected_downtime_ms;
    if (s.handover_estimate_ms > 0) j["x-handover-estimate-ms"] = s.handover_estimate_ms;
    if (s.status == MigrationStatus::completed) j["downtime"] = s.downtime_ms;
    if (const auto& d = s.downtime_parts; s.status == MigrationStatus::completed && d.last_round > 0) {  // the source's
        j["x-downtime-parts"] = Json{{"pause", d.pause}, {"last-round", d.last_round}, {"state", d.state},
                                     {"destination", d.destination}, {"go", d.go}};
    }
    j["cpu-throttle-percentage"] = s.cpu_throttle_percentage;
    j["x-rounds"] = s.rounds;
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
    j["ram"] = Json{{"transferred", r.transferred},       {"x-in-flight", r.in_flight},
                    {"remaining", r.remaining},
                    {"total", r.total},                   {"duplicate", r.duplicate},
                    {"normal", r.normal},                 {"normal-bytes", r.normal_bytes},
                    {"dirty-pages-rate", r.dirty_pages_rate}, {"mbps", r.mbps},
                    {"dirty-sync-count", r.dirty_sync_count}, {"pages-per-second", r.pages_per_second},
                    {"precopy-bytes", r.precopy_bytes},   {"downtime-bytes", r.downtime_bytes},
                    {"x-skipped-unpopulated", r.skipped_unpopulated},
                    {"x-populate-announced", r.populate_announced}, {"x-populated-ahead", r.populated_ahead}};
    return j;
}

std::string migration_stats_text(const Json& j) {
    std::string out = fmt::format("Migration status: {}\n", j["status"].get<std::string>());
    if (!j.contains("ram")) return out;
    const Json& r = j["ram"];
    auto kb = [&](const char* k) { return r[k].get<uint64_t>() / 1024; };
    if (j.contains("error-desc")) out += fmt::format("error: {}\n", j["error-desc"].get<std::string>());
    out += fmt::format("total time: {} ms\n", j["total-time"].get<uint64_t>());
    if (j.contains("downtime")) out += fmt::format("downtime: {} ms\n", j["downtime"].get<uint64_t>());
    if (j.contains("x-downtime-parts")) {
        const Json& d = j["x-downtime-parts"];
        out += fmt::format("downtime parts: pause {:.1f}, last round {:.1f}, state {:.1f}, destination {:.1f}, go {:.1f} ms\n",
                           d["pause"].get<double>(), d["last-round"].get<double>(), d["state"].get<double>(),
                           d["destination"].get<double>(), d["go"].get<double>());
    }
    if (!j.contains("downtime")) out += fmt::format("expected downtime: {} ms\n", j["expected-downtime"].get<uint64_t>());
    if (j.contains("x-handover-estimate-ms")) {
        out += fmt::format("hand-over estimate: {:.1f} ms (the destination saved and loaded its own state)\n",
                           j["x-handover-estimate-ms"].get<double>());
    }
    if (j.contains("x-guest-switchover-pause-ms")) {
        out += fmt::format("guest-observed pause: {:.1f} ms\n", j["x-guest-switchover-pause-ms"].get<double>());
    }
    if (j.contains("x-guest-migration-stall-ms")) {
        out += fmt::format("guest's longest stall before the switchover: {:.1f} ms\n", j["x-guest-migration-stall-ms"].get<double>());
    }
    if (j.contains("x-guest-max-pause-ms")) {
        out += fmt::format("guest's longest pause reported: {:.1f} ms\n", j["x-guest-max-pause-ms"].get<double>());
    }
    out += fmt::format("setup: {} ms\nrounds: {}\n", j["setup-time"].get<uint64_t>(), j["x-rounds"].get<uint64_t>());
    out += fmt::format("transferred ram: {} kbytes\n", kb("transferred"));
    if (r.value("x-in-flight", uint64_t{0}) != 0) out += fmt::format("in flight ram: {} kbytes\n", kb("x-in-flight"));
    out += fmt::format("throughput: {:.2f} mbps\nremaining ram: {} kbytes\n", r["mbps"].get<double>(), kb("remaining"));
    out += fmt::format("total ram: {} kbytes\nduplicate: {} pages\nnormal: {} pages\nnormal bytes: {} kbytes\n", kb("total"),
                       r["duplicate"].get<uint64_t>(), r["normal"].get<uint64_t>(), kb("normal-bytes"));
    out += fmt::format("unpopulated (skipped): {} pages\ndirty sync count: {}\ndirty pages rate: {:.0f} pages/s\n",
                       r["x-skipped-unpopulated"].get<uint64_t>(), r["dirty-sync-count"].get<uint64_t>(),
                       r["dirty-pages-rate"].get<double>());
    if (r.value("x-populate-announced", uint64_t{0}) != 0) {  // a destination that prepared RAM ahead
        out += fmt::format("populated ahead: {} of {} kbytes announced\n", kb("x-populated-ahead"), kb("x-populate-announced"));
    }
    out += fmt::format("precopy ram: {} kbytes\ndowntime ram: {} kbytes\ncpu throttle percentage: {}\n", kb("precopy-bytes"),
                       kb("downtime-bytes"), j["cpu-throttle-percentage"].get<uint64_t>());
    return out;
}

std::string round_log_text(const Json& j) {
    if (!j.contains("x-round-log") || j["x-round-log"].empty()) return "no RAM round yet\n";
    std::string out = fmt::format("{:>6} {:>14} {:>10} {:>10} {:>12}\n", "round", "bytes", "ms", "MB/s", "dirty after");
    for (const Json& r : j["x-round-log"]) {
        double secs = r["seconds"].get<double>();
        uint64_t bytes = r["bytes"].get<uint64_t>();
        out += fmt::format("{:>6} {:>14} {:>10.1f} {:>10.1f} {:>12}\n", r["round"].get<uint32_t>(), bytes, secs * 1e3,
                           secs > 0 ? static_cast<double>(bytes) / secs / 1e6 : 0.0, r["dirty-after"].get<uint64_t>());
    }
    return out;
}

std::string progress_line(const Json& j) {
    std::string status = j["status"].get<std::string>();
    if (!j.contains("ram")) return fmt::format("\r{:<78}", status);
    const Json& r = j["ram"];
    double total = static_cast<double>(r["total"].get<uint64_t>());
    double done = static_cast<double>((r["normal"].get<uint64_t>() + r["duplicate"].get<uint64_t>() +
                                       r["x-skipped-unpopulated"].get<uint64_t>()) *
                                      4096);
    int pct = status == "completed" ? 100 : std::min(99, static_cast<int>(total > 0 ? done * 100 / total : 0));
    int bars = pct / 5;
    uint64_t in_flight = r.value("x-in-flight", uint64_t{0});
    std::string moved = format_size(r["transferred"].get<uint64_t>());
    moved += in_flight != 0 ? " arrived, " + format_size(in_flight) + " in flight" : " sent";
    std::string line = fmt::format("[{}{}] {:3}%  {}  {:.0f} Mbps  round {}  {}", std::string(static_cast<size_t>(bars), '#'),
                                   std::string(static_cast<size_t>(20 - bars), '-'), pct, moved, r["mbps"].get<double>(),
                                   j["x-rounds"].get<uint64_t>(), status);
    return fmt::format("\r{:<96}", line);  // padded: it overwrites a longer line before it
}

namespace {

void add_outgoing(CommandTable& t, migration::MigrationManager& mgr, machine::Machine& m) {
    auto query = [&mgr, &m] { return migration_stats_json(mgr.query(), m.control().report()); };
    Command migrate{"migrate", "migrate",
                    {{"detach", ArgType::flag, true, "-d"}, {"uri", ArgType::string}},
                    "live-migrate the VM to URI (tcp:HOST:PORT, unix:PATH, rdma:HOST:PORT); -d: do not wait",
                    [&mgr](const Json& a) -> Result<Json> {
                        if (auto s = mgr.migrate(a["uri"].get<std::string>()); !s) return s.error();
                        return Json::object();
                    },
                    {}};
    migrate.follow = [query](const Json& args, const std::function<bool(const std::string&)>& write) {
        if (args.value("detach", false)) return;
        for (;;) {
            Json j = query();
            if (!write(progress_line(j))) return;
            std::string st = j["status"].get<std::string>();
            if (st == "completed" || st == "failed" || st == "cancelled" || st == "none") {
                write("\n" + migration_stats_text(j));
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
    };
    t.add(std::move(migrate));
    t.add({"migrate_cancel", "migrate-cancel", {}, "cancel the migration in progress (the VM keeps running)",
           [&mgr](const Json&) -> Result<Json> {
               mgr.cancel();
               return Json::object();
           },
           {}});
    t.add({"info migrate", "query-migrate", {}, "migration status and statistics",
           [query](const Json&) -> Result<Json> { return query(); }, migration_stats_text});
    t.add({"info migrate-rounds", "", {}, "each RAM round of the last migration: bytes, time, throughput",
           [query](const Json&) -> Result<Json> { return query(); }, round_log_text});
}

void add_settings(CommandTable& t, migration::MigrationManager& mgr) {
    t.add({"migrate_set_capability", "", {{"capability", ArgType::string}, {"state", ArgType::boolean}},
           "turn a migration capability on or off", [&mgr](const Json& a) -> Result<Json> {
               if (auto s = mgr.set_capability(a["capability"], a["state"]); !s) return s.error();
               return Json::object();
           }, {}});
    Command caps{"", "migrate-set-capabilities", {{"capabilities", ArgType::json}}, "set capabilities",
                 [&mgr](const Json& a) -> Result<Json> {
                     if (!a["capabilities"].is_array()) return Error("'capabilities' must be an array");
                     for (const auto& c : a["capabilities"]) {
                         if (!c.is_object() || !c.contains("capability") || !c["capability"].is_string() ||
                             !c.contains("state") || !c["state"].is_boolean()) {
                             return Error("each capability must be {\"capability\": NAME, \"state\": true|false}");
                         }
                         if (auto s = mgr.set_capability(c["capability"], c["state"]); !s) return s.error();
                     }
                     return Json::object();
                 },
                 {}};
    t.add(std::move(caps));
    t.add({"migrate_set_parameter", "", {{"parameter", ArgType::string}, {"value", ArgType::string}},
           "set a migration parameter (e.g. max-bandwidth 40g, downtime-limit 50)", [&mgr](const Json& a) -> Result<Json> {
               if (auto s = mgr.set_parameter(a["parameter"], a["value"]); !s) return s.error();
               return Json::object();
           }, {}});
    Command params{"", "migrate-set-parameters", {}, "set parameters: {\"max-bandwidth\": 1073741824, ...}",
                   [&mgr](const Json& a) -> Result<Json> {
                       for (const auto& [k, v] : a.items()) {
                           std::string text = v.is_string() ? v.get<std::string>() : v.dump();
                           if (!v.is_string() && !v.is_number_unsigned()) return Error("parameter '" + k + "' must be a string or a non-negative integer");
                           if (auto s = mgr.set_parameter(k, text); !s) return s.error();
                       }
                       return Json::object();
                   },
                   {}};
    params.any_args = true;
    t.add(std::move(params));
    t.add({"info migrate_capabilities", "query-migrate-capabilities", {}, "migration capabilities",
           [&mgr](const Json&) -> Result<Json> {
               Json out = Json::array();
               for (const auto& [n, on] : mgr.settings().capability_list()) out.push_back({{"capability", n}, {"state", on}});
               return out;
           },
           [](const Json& j) {
               std::string out;
               for (const auto& c : j) out += fmt::format("{}: {}\n", c["capability"].get<std::string>(), c["state"].get<bool>() ? "on" : "off");
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
               for (const auto& [k, v] : j.items()) out += fmt::format("{}: {}\n", k, v.get<std::string>());
               return out;
           }});
}

}  // namespace

void add_migration_commands(CommandTable& t, migration::MigrationManager& mgr, machine::Machine& m,
                            std::function<void(const Error&)> on_incoming_failure) {
    add_outgoing(t, mgr, m);
    add_settings(t, mgr);
    t.add({"migrate_incoming", "migrate-incoming", {{"uri", ArgType::string}},
           "start listening for the migration deferred with --incoming defer",
           [&mgr, &m, fail = std::move(on_incoming_failure)](const Json& a) -> Result<Json> {
               if (!mgr.incoming_deferred()) return Error("this vmm was not started with --incoming defer");
               bool stay_paused = m.spec().start_paused;
               if (auto s = mgr.incoming(a["uri"].get<std::string>(), stay_paused, fail); !s) return s.error();
               return Json::object();
           },
           {}});
}

}  // namespace vmm::monitor

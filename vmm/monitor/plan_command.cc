#include "vmm/monitor/plan_command.h"

#include <fmt/format.h>

#include <algorithm>

#include "vmm/common/units.h"
#include "vmm/memory/populated.h"
#include "vmm/migration/precopy/deadline.h"
#include "vmm/migration/precopy/plan.h"
#include "vmm/monitor/client/json_access.h"
#include "vmm/monitor/machine_commands.h"

namespace vmm::monitor {

namespace {

using migration::PlanFacts;
using migration::PlanRow;
using migration::PlanStrategy;

// The window the dirty rate is averaged over ("a few seconds").
constexpr auto kDirtyWindow = std::chrono::milliseconds(4000);

// The link's rate: given, max-bandwidth, or the last migration's measurement; `from` says which.
Result<double> link_rate(const Json& args, const migration::Settings& s, const migration::MigrationStats& last,
                         std::string& from) {
    if (const Json* b = member(args, "bandwidth"); b != nullptr) {
        auto v = as_uint(*b);
        if (!v || *v == 0) return Error("bandwidth: give the link's rate in bytes/s, above 0 (e.g. 1250m for 10 Gbit/s)");
        from = "given";
        return static_cast<double>(*v);
    }
    if (s.params.max_bandwidth != 0) {
        from = "max-bandwidth";
        return static_cast<double>(s.params.max_bandwidth);
    }
    if (last.ram.mbps > 0) {
        from = fmt::format("measured by the last migration ({})", last.uri);
        return last.ram.mbps * 1e6 / 8;
    }
    return Error("the link's rate is not known here: give it (info migrate-plan 1250m for 10 Gbit/s), set "
                 "max-bandwidth, or migrate once over that link");
}

// The bytes a bulk round would send: the populated pages (pagemap), every page where it cannot tell.
uint64_t populated_bytes(machine::Machine& m) {
    auto reader = memory::PagemapReader::open();
    uint64_t pages = 0;
    for (const auto& b : m.memory().blocks()) pages += memory::pages_to_send(reader ? &*reader : nullptr, *b);
    return pages * memory::kPageSize;
}

// What the guest dirtied over the window: in all, by block, by vCPU (the dirty ring only).
Result<Json> dirty_json(machine::Machine& m, PlanFacts& f) {
    memory::DirtyWindow w = m.dirty_rate().window(kDirtyWindow);
    if (w.seconds <= 0) return Error("the guest's dirtying has no measurement yet (one a second): ask again in a second");
    memory::DirtyRate r = m.dirty_rate().rate();
    auto per_s = [&w](uint64_t pages) { return static_cast<double>(pages * memory::kPageSize) / w.seconds; };
    double working = static_cast<double>(r.working_set_pages * memory::kPageSize);
    f.dirty.bytes_per_s = per_s(w.pages);
    f.dirty.fast_bytes_per_s = w.fast_pages_per_second() * memory::kPageSize;
    f.dirty.hot_bytes = static_cast<double>(r.hot_set_pages * memory::kPageSize);
    f.dirty.ram_bytes = static_cast<double>(m.memory().total_size());
    Json blocks = Json::array(), vcpus = Json::array();
    const auto& all = m.memory().blocks();
    for (size_t i = 0; i < all.size() && i < w.block_pages.size(); ++i)
        blocks.push_back({{"name", all[i]->name()}, {"bytes-per-second", per_s(w.block_pages[i])}});
    for (size_t i = 0; i < w.vcpu_pages.size(); ++i) {
        vcpus.push_back({{"cpu-index", i}, {"bytes-per-second", per_s(w.vcpu_pages[i])}});
        f.vcpu_bytes_per_s.push_back(per_s(w.vcpu_pages[i]));
    }
    return Json{{"bytes-per-second", f.dirty.bytes_per_s}, {"window-ms", w.seconds * 1000.0},
                {"short-round-bytes-per-second", f.dirty.fast_bytes_per_s},
                {"working-set-bytes", working}, {"working-set-window-ms", r.working_set_seconds * 1000.0},
                {"working-set-windows", working_set_windows_json(r)},
                {"hot-set-bytes", f.dirty.hot_bytes}, {"tracking", std::string(memory::to_string(m.spec().dirty_backend))},
                {"blocks", std::move(blocks)}, {"vcpus", std::move(vcpus)}};
}

// What a strategy needs that is not set now (empty: it runs as things are).
std::string needs(const PlanRow& r, const migration::Settings& set, bool ring) {
    PlanStrategy s = r.strategy;
    std::vector<std::string> n;
    if (s == PlanStrategy::one_pause && r.pause_limit_ms > set.params.downtime_limit_ms) {
        bool strategy = set.params.deadline != "off" &&
                        migration::names_strategy(set.params.deadline_strategy, migration::DeadlineStrategy::downtime) &&
                        set.params.deadline_max_downtime_ms >= r.pause_limit_ms;
        if (!strategy) {
            n.push_back(fmt::format("an x-deadline with x-deadline-strategy downtime and x-deadline-max-downtime of {} ms "
                                    "or more (or downtime-limit {} by hand)",
                                    r.pause_limit_ms, r.pause_limit_ms));
        }
    }
    if (s == PlanStrategy::dirty_limit) {
        if (!ring) n.push_back("the dirty ring (start vmm with --dirty-tracking ring)");
        if (set.params.deadline == "off" || !migration::names_strategy(set.params.deadline_strategy, migration::DeadlineStrategy::dirty_limit))
            n.push_back("an x-deadline with x-deadline-strategy dirty-limit (or set_vcpu_dirty_limit by hand)");
    }
    bool postcopy = s == PlanStrategy::postcopy_after_round || s == PlanStrategy::postcopy_now;
    if (s == PlanStrategy::auto_converge && !set.caps.auto_converge) n.push_back("the capability auto-converge");
    if (postcopy && !set.caps.postcopy_ram) n.push_back("the capability postcopy-ram on both sides");
    if (s == PlanStrategy::postcopy_after_round && set.params.postcopy_after_rounds != 1)
        n.push_back("x-postcopy-after-rounds 1 (or migrate_start_postcopy once the first round ends)");
    if (s == PlanStrategy::postcopy_now) n.push_back("migrate_start_postcopy right after migrate");
    return fmt::format("{}", fmt::join(n, "; "));
}

Json row_json(const PlanRow& r, const migration::Settings& set, bool ring) {
    Json j{{"strategy", migration::to_string(r.strategy)}, {"converges", r.converges},
           {"total-ms", r.total_ms},           {"downtime-ms", r.downtime_ms},
           {"sent-bytes", r.sent_bytes},       {"rounds", r.rounds},
           {"throttled-ms", r.throttled_ms},   {"throttle-percent", r.throttle_percent},
           {"blocked-ms-at-most", r.blocked_ms_at_most}, {"why-no-end", r.why_no_end},
           {"needs", needs(r, set, ring)}};
    if (r.strategy == PlanStrategy::one_pause) j["pause-limit-ms"] = r.pause_limit_ms;
    if (r.strategy == PlanStrategy::dirty_limit) {
        j["vcpu-limit-bytes-per-second"] = r.vcpu_limit_bytes_per_s;
        j["limited-vcpus"] = r.limited_vcpus;
    }
    return j;
}

Result<Json> plan(const Json& args, migration::MigrationManager& mgr, machine::Machine& m) {
    migration::Settings set = mgr.settings();
    migration::MigrationStats last = mgr.query();
    PlanFacts f;
    std::string link_from;
    auto link = link_rate(args, set, last, link_from);
    if (!link) return link.error();
    f.link_bytes_per_s = *link;
    auto dirty = dirty_json(m, f);
    if (!dirty) return dirty.error();
    f.populated_bytes = populated_bytes(m);
    f.postcopy_bytes_per_s = static_cast<double>(set.params.max_postcopy_bandwidth);
    f.handover_ms = last.handover_estimate_ms;
    f.params = set.params;
    if (auto d = migration::parse_deadline_ms(set.params.deadline); d) f.deadline_ms = *d;  // "off": none
    bool ring = m.spec().dirty_backend == memory::DirtyBackend::ring;
    if (f.vcpu_bytes_per_s.empty()) {  // the dirty log cannot tell who wrote: taken as even
        size_t n = std::max<size_t>(m.vcpus().count(), 1);
        f.vcpu_bytes_per_s.assign(n, f.dirty.bytes_per_s / static_cast<double>(n));
    }
    Json rows = Json::array();
    for (const PlanRow& r : migration::plan_migration(f)) rows.push_back(row_json(r, set, ring));
    (*dirty)["vcpu-rates"] = ring ? "measured (the dirty ring)" : "taken as even (the dirty log cannot tell which vCPU wrote)";
    return Json{{"link-bytes-per-second", f.link_bytes_per_s}, {"link-from", link_from},
                {"ram-bytes", m.memory().total_size()}, {"populated-bytes", f.populated_bytes},
                {"dirty", std::move(*dirty)}, {"downtime-limit-ms", set.params.downtime_limit_ms},
                {"handover-ms", f.handover_ms},
                {"handover-from", f.handover_ms > 0 ? "the last migration's rehearsal" : "unknown before a migration: 0 taken"},
                {"strategies", std::move(rows)}};
}

std::string rate(double bytes_per_s) { return format_size(static_cast<uint64_t>(bytes_per_s)) + "/s"; }
std::string secs(double ms) { return ms < 1000 ? fmt::format("{:.0f} ms", ms) : fmt::format("{:.1f} s", ms / 1000); }

std::string dirty_text(const Json& d) {
    std::string out = fmt::format("the guest dirties {} (over the last {:.1f} s)", rate(num(d, "bytes-per-second")),
                                  num(d, "window-ms") / 1000);
    if (num(d, "short-round-bytes-per-second") > num(d, "bytes-per-second") * 1.2) {
        out += fmt::format(", {} over a tenth of a second", rate(num(d, "short-round-bytes-per-second")));
    }
    if (num(d, "hot-set-bytes") > 0) {
        out += fmt::format("; a hot set of {} (what it dirtied in {:.1f} s)",
                           format_size(static_cast<uint64_t>(num(d, "hot-set-bytes"))), num(d, "working-set-window-ms") / 1000);
    }
    out += "\n";
    std::vector<std::string> parts;
    for (const Json& v : child(d, "vcpus")) parts.push_back(fmt::format("{} {}", u64(v, "cpu-index"), rate(num(v, "bytes-per-second"))));
    if (!parts.empty()) out += fmt::format("  by vCPU: {}\n", fmt::join(parts, ", "));
    parts.clear();
    for (const Json& b : child(d, "blocks")) parts.push_back(fmt::format("{} {}", str(b, "name"), rate(num(b, "bytes-per-second"))));
    out += fmt::format("  by RAM block: {}\n", fmt::join(parts, ", "));
    return out;
}

std::string row_text(const Json& r) {
    std::string cost = "none";
    if (num(r, "throttled-ms") > 0 && r.contains("limited-vcpus")) {
        cost = fmt::format("throttled {} ({} held to {} each, up to {} %)", secs(num(r, "throttled-ms")),
                           u64(r, "limited-vcpus") == 1 ? "1 vCPU" : fmt::format("{} vCPUs", u64(r, "limited-vcpus")),
                           rate(num(r, "vcpu-limit-bytes-per-second")), u64(r, "throttle-percent"));
    } else if (num(r, "throttled-ms") > 0) {
        cost = fmt::format("throttled {} (up to {} %)", secs(num(r, "throttled-ms")), u64(r, "throttle-percent"));
    } else if (r.contains("pause-limit-ms") && flag(r, "converges")) {
        cost = fmt::format("paused {} (downtime-limit {} ms)", secs(num(r, "downtime-ms")), u64(r, "pause-limit-ms"));
    } else if (num(r, "blocked-ms-at-most") > 0) {
        cost = fmt::format("blocked {} at most", secs(num(r, "blocked-ms-at-most")));
    }
    bool ends = flag(r, "converges");
    std::string out = fmt::format("{:<25} {:<4} {:>9} {:>9} {:>10} {}\n", str(r, "strategy"), ends ? "yes" : "no",
                                  ends ? secs(num(r, "total-ms")) : "never", ends ? secs(num(r, "downtime-ms")) : "-",
                                  format_size(static_cast<uint64_t>(num(r, "sent-bytes"))), cost);
    if (!ends) out += fmt::format("    no end: {}\n", str(r, "why-no-end"));
    if (!str(r, "needs").empty()) out += fmt::format("    needs: {}\n", str(r, "needs"));
    return out;
}

}  // namespace

std::string migrate_plan_text(const Json& j) {
    std::string out = fmt::format("a migration of {} RAM ({} populated) over a link of {} ({})\n",
                                  format_size(u64(j, "ram-bytes")), format_size(u64(j, "populated-bytes")),
                                  rate(num(j, "link-bytes-per-second")), str(j, "link-from"));
    out += dirty_text(child(j, "dirty"));
    out += fmt::format("downtime-limit {} ms; hand-over {:.1f} ms ({})\n", u64(j, "downtime-limit-ms"), num(j, "handover-ms"),
                       str(j, "handover-from"));
    out += fmt::format("{:<25} {:<4} {:>9} {:>9} {:>10} {}\n", "strategy", "ends", "total", "downtime", "sent", "guest's cost");
    for (const Json& r : child(j, "strategies")) out += row_text(r);
    return out;
}

void add_plan_command(CommandTable& t, migration::MigrationManager& mgr, machine::Machine& m) {
    t.add({"info migrate-plan", "x-query-migrate-plan", {{"bandwidth", ArgType::size, true}},
           "before a migration: each strategy's predicted end, downtime, bytes and cost to the guest at the dirty rate "
           "measured now; bandwidth: the link's bytes/s (default: max-bandwidth, else the last migration's)",
           [&mgr, &m](const Json& a) { return plan(a, mgr, m); }, migrate_plan_text});
}

}  // namespace vmm::monitor

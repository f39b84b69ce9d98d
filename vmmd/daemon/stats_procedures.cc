#include "vmmd/daemon/stats_procedures.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <algorithm>
#include <map>

#include "vmmd/daemon/connect_procedures.h"
#include "vmmd/domain/domain_args.h"
#include "vmmd/rpc/typed_params.h"
#include "vmmd/runtime/proc_stats.h"

namespace vmmd {

namespace {

using rpc::Access;
using rpc::Caller;
using rpc::Proc;
using rpc::Reply;
using rpc::TypedParam;
using xdr::Reader;
using xdr::Writer;

// remote_protocol.x's bounds.
constexpr int32_t kNodeStatsMax = 16;          // REMOTE_NODE_CPU_STATS_MAX, REMOTE_NODE_MEMORY_STATS_MAX
constexpr int32_t kNodeMaxCells = 1024;        // REMOTE_NODE_MAX_CELLS
constexpr uint32_t kVcpuInfoMax = 16384;       // REMOTE_VCPUINFO_MAX
constexpr uint64_t kCpumapsMax = 8388608;      // REMOTE_CPUMAPS_MAX
constexpr size_t kCpumapMax = 2048;            // REMOTE_CPUMAP_MAX
constexpr uint32_t kMemoryStatsMax = 1024;     // REMOTE_DOMAIN_MEMORY_STATS_MAX
constexpr size_t kNonnullDomainMinBytes = 24;  // an empty name, the UUID, the id

// The stat groups domstats answers (VIR_DOMAIN_STATS_*), and the list filters it takes.
constexpr uint32_t kServedStats = VIR_DOMAIN_STATS_STATE | VIR_DOMAIN_STATS_CPU_TOTAL | VIR_DOMAIN_STATS_BALLOON |
                                  VIR_DOMAIN_STATS_VCPU;
constexpr uint32_t kListFilters = VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE | VIR_CONNECT_GET_ALL_DOMAINS_STATS_INACTIVE |
                                  VIR_CONNECT_GET_ALL_DOMAINS_STATS_PERSISTENT | VIR_CONNECT_GET_ALL_DOMAINS_STATS_TRANSIENT |
                                  VIR_CONNECT_GET_ALL_DOMAINS_STATS_RUNNING | VIR_CONNECT_GET_ALL_DOMAINS_STATS_PAUSED |
                                  VIR_CONNECT_GET_ALL_DOMAINS_STATS_SHUTOFF | VIR_CONNECT_GET_ALL_DOMAINS_STATS_OTHER;

// A node statistics reply: with nparams 0 only the count (libvirt's first pass), else up to
// nparams of the fields, then the count.
Reply node_stats_reply(const std::vector<std::pair<const char*, uint64_t>>& fields, int32_t nparams) {
    Writer w;
    size_t n = nparams == 0 ? 0 : std::min(fields.size(), static_cast<size_t>(nparams));
    w.u32(static_cast<uint32_t>(n));
    for (size_t i = 0; i < n; ++i) {
        w.string(fields[i].first);
        w.u64(fields[i].second);
    }
    w.i32(static_cast<int32_t>(fields.size()));
    return rpc::ok(std::move(w));
}

Reply node_cpu_stats(Caller&, Reader& a) {
    auto cpu = a.i32();
    auto nparams = a.i32();
    auto flags = a.u32();
    if (!cpu || !nparams || !flags) return undecodable("NODE_GET_CPU_STATS");
    if (*nparams < 0 || *nparams > kNodeStatsMax || *flags != 0) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("NODE_GET_CPU_STATS: nparams {} (0 to {}), flags {:#x} (none)",
                                                          *nparams, kNodeStatsMax, *flags));
    }
    auto text = read_proc_file("/proc/stat");
    if (!text) return rpc::fail(VIR_ERR_SYSTEM_ERROR, "cannot read /proc/stat");
    auto t = parse_cpu_times(*text, *cpu == VIR_NODE_CPU_STATS_ALL_CPUS ? -1 : *cpu, clock_ticks());
    if (!t || *cpu < VIR_NODE_CPU_STATS_ALL_CPUS) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("Invalid cpuNum {}: this host's CPUs are 0 to {}", *cpu,
                                                          read_node_info().cpus - 1));
    }
    return node_stats_reply({{VIR_NODE_CPU_STATS_KERNEL, t->kernel_ns},
                             {VIR_NODE_CPU_STATS_USER, t->user_ns},
                             {VIR_NODE_CPU_STATS_IDLE, t->idle_ns},
                             {VIR_NODE_CPU_STATS_IOWAIT, t->iowait_ns}},
                            *nparams);
}

std::optional<std::map<std::string, uint64_t>> meminfo() {
    auto text = read_proc_file("/proc/meminfo");
    if (!text) return std::nullopt;
    return parse_meminfo(*text);
}

Reply node_memory_stats(Caller&, Reader& a) {
    auto nparams = a.i32();
    auto cell = a.i32();
    auto flags = a.u32();
    if (!nparams || !cell || !flags) return undecodable("NODE_GET_MEMORY_STATS");
    if (*nparams < 0 || *nparams > kNodeStatsMax || *flags != 0) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("NODE_GET_MEMORY_STATS: nparams {} (0 to {}), flags {:#x} (none)",
                                                          *nparams, kNodeStatsMax, *flags));
    }
    // vmmd sees the host as one NUMA cell (as its capabilities say).
    if (*cell != VIR_NODE_MEMORY_STATS_ALL_CELLS && *cell != 0) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("Invalid cell number {}: this host has cell 0 only", *cell));
    }
    auto m = meminfo();
    if (!m) return rpc::fail(VIR_ERR_SYSTEM_ERROR, "cannot read /proc/meminfo");
    return node_stats_reply({{VIR_NODE_MEMORY_STATS_TOTAL, (*m)["MemTotal"]},
                             {VIR_NODE_MEMORY_STATS_FREE, (*m)["MemFree"]},
                             {VIR_NODE_MEMORY_STATS_BUFFERS, (*m)["Buffers"]},
                             {VIR_NODE_MEMORY_STATS_CACHED, (*m)["Cached"]}},
                            *nparams);
}

Reply node_free_memory(Caller&, Reader&) {
    auto m = meminfo();
    if (!m) return rpc::fail(VIR_ERR_SYSTEM_ERROR, "cannot read /proc/meminfo");
    return rpc::ok_u64((*m)["MemFree"] * 1024);
}

Reply node_cells_free_memory(Caller&, Reader& a) {
    auto start = a.i32();
    auto max = a.i32();
    if (!start || !max) return undecodable("NODE_GET_CELLS_FREE_MEMORY");
    if (*max <= 0 || *max > kNodeMaxCells) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("maxCells {}: 1 to {}", *max, kNodeMaxCells));
    }
    if (*start != 0) return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("start cell {} out of range (0-0)", *start));
    auto m = meminfo();
    if (!m) return rpc::fail(VIR_ERR_SYSTEM_ERROR, "cannot read /proc/meminfo");
    Writer w;
    w.u32(1);
    w.u64((*m)["MemFree"] * 1024);
    return rpc::ok(std::move(w));
}

// The host's CPUs: how many there can be (the highest present + 1), which are online.
Reply node_cpu_map(Caller&, Reader& a) {
    auto need_map = a.i32();
    auto need_online = a.i32();
    auto flags = a.u32();
    if (!need_map || !need_online || !flags) return undecodable("NODE_GET_CPU_MAP");
    if (*flags != 0) return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("NODE_GET_CPU_MAP: flags {:#x} (none)", *flags));
    auto present_text = read_proc_file("/sys/devices/system/cpu/present");
    auto online_text = read_proc_file("/sys/devices/system/cpu/online");
    auto present = present_text ? parse_cpu_list(*present_text) : std::nullopt;
    auto online = online_text ? parse_cpu_list(*online_text) : std::nullopt;
    if (!present || present->empty() || !online) {
        return rpc::fail(VIR_ERR_SYSTEM_ERROR, "cannot read /sys/devices/system/cpu/present and online");
    }
    int32_t cpus = present->back() + 1;
    std::vector<uint8_t> map(*need_map != 0 ? static_cast<size_t>(cpus + 7) / 8 : 0, 0);
    if (map.size() > kCpumapMax) return rpc::fail(VIR_ERR_INTERNAL_ERROR, fmt::format("{} CPUs: more than a map holds", cpus));
    for (int c : *online)
        if (static_cast<size_t>(c) / 8 < map.size()) map[static_cast<size_t>(c) / 8] |= static_cast<uint8_t>(1u << (c % 8));
    Writer w;
    w.opaque(map);
    w.u32(*need_online != 0 ? static_cast<uint32_t>(online->size()) : 0);
    w.i32(cpus);
    return rpc::ok(std::move(w));
}

// A running domain's vmm as /proc has it.
struct Live {
    pid_t pid;
    TaskStat process;
    std::vector<VcpuThread> vcpus;
};

std::optional<Live> live(const DomainView& v, const VmmPid& vmm_pid) {
    if (!v.active()) return std::nullopt;
    auto pid = vmm_pid(v.def.uuid);
    if (!pid) return std::nullopt;
    auto process = read_task(*pid);
    if (!process) return std::nullopt;
    return Live{*pid, *process, read_vcpu_threads(*pid)};
}

// Row `row` of cpumaps `len` bytes wide: a bit for each CPU in `cpus` (libvirt's VIR_USE_CPU).
void set_cpumap(std::vector<uint8_t>& maps, size_t row, size_t len, const std::vector<bool>& cpus) {
    for (size_t cpu = 0; cpu < cpus.size() && cpu / 8 < len; ++cpu)
        if (cpus[cpu]) maps[row * len + cpu / 8] |= static_cast<uint8_t>(1u << (cpu % 8));
}

int32_t vcpu_state(const VcpuThread& t) { return t.stat.state == 'R' ? VIR_VCPU_RUNNING : VIR_VCPU_BLOCKED; }

Reply get_vcpus(const DomainView& v, Reader& a, const VmmPid& vmm_pid) {
    auto maxinfo = a.i32();
    auto maplen = a.i32();
    if (!maxinfo || !maplen) return undecodable("DOMAIN_GET_VCPUS");
    if (*maxinfo < 0 || static_cast<uint32_t>(*maxinfo) > kVcpuInfoMax || *maplen < 0 ||
        static_cast<uint64_t>(*maxinfo) * static_cast<uint64_t>(*maplen) > kCpumapsMax) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("DOMAIN_GET_VCPUS: maxinfo {} and maplen {} out of range", *maxinfo, *maplen));
    }
    auto l = live(v, vmm_pid);
    if (!l) return not_running(v);
    size_t n = std::min(l->vcpus.size(), static_cast<size_t>(*maxinfo));
    Writer w;
    w.u32(static_cast<uint32_t>(n));
    for (size_t i = 0; i < n; ++i) {
        const VcpuThread& t = l->vcpus[i];
        w.u32(static_cast<uint32_t>(t.index));
        w.i32(vcpu_state(t));
        w.u64(t.stat.user_ns + t.stat.system_ns);
        w.i32(t.stat.processor);
    }
    std::vector<uint8_t> maps(n * static_cast<size_t>(*maplen), 0);
    for (size_t i = 0; i < n; ++i) set_cpumap(maps, i, static_cast<size_t>(*maplen), l->vcpus[i].affinity);
    w.opaque(maps);
    return rpc::ok(std::move(w));
}

// Each vCPU's affinity as cpumaps of `maplen` bytes: the live threads' (a running domain, unless
// the config is asked), else every host CPU (vmm pins nothing of its own).
Reply vcpu_pin_info(const DomainView& v, Reader& a, const VmmPid& vmm_pid) {
    auto ncpumaps = a.i32();
    auto maplen = a.i32();
    auto flags = a.u32();
    if (!ncpumaps || !maplen || !flags) return undecodable("DOMAIN_GET_VCPU_PIN_INFO");
    if (*ncpumaps < 0 || static_cast<uint32_t>(*ncpumaps) > kVcpuInfoMax || *maplen <= 0 ||
        static_cast<uint64_t>(*ncpumaps) * static_cast<uint64_t>(*maplen) > kCpumapsMax) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("DOMAIN_GET_VCPU_PIN_INFO: ncpumaps {} and maplen {} out of range",
                                                          *ncpumaps, *maplen));
    }
    bool config = (*flags & VIR_DOMAIN_AFFECT_CONFIG) != 0;
    if (config && (*flags & VIR_DOMAIN_AFFECT_LIVE)) return rpc::fail(VIR_ERR_INVALID_ARG, "live and config are mutually exclusive");
    auto l = config ? std::nullopt : live(v, vmm_pid);
    if ((*flags & VIR_DOMAIN_AFFECT_LIVE) && !l) return not_running(v);
    size_t n = std::min(static_cast<size_t>(v.def.vcpus), static_cast<size_t>(*ncpumaps)), len = static_cast<size_t>(*maplen);
    std::vector<bool> every(static_cast<size_t>(std::max(1, read_node_info().cpus)), true);
    std::vector<uint8_t> maps(n * len, 0);
    for (size_t i = 0; i < n; ++i) set_cpumap(maps, i, len, l && i < l->vcpus.size() ? l->vcpus[i].affinity : every);
    Writer w;
    w.opaque(maps);
    w.i32(static_cast<int32_t>(n));
    return rpc::ok(std::move(w));
}

// vcpucount: a vmm domain's vCPUs are fixed, so current and maximum, live and config, agree.
Reply get_vcpus_flags(const DomainView& v, uint32_t flags) {
    uint32_t known = uint32_t{VIR_DOMAIN_AFFECT_LIVE} | uint32_t{VIR_DOMAIN_AFFECT_CONFIG} | uint32_t{VIR_DOMAIN_VCPU_MAXIMUM} |
                     uint32_t{VIR_DOMAIN_VCPU_GUEST};
    if ((flags & ~known) != 0) return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("DOMAIN_GET_VCPUS_FLAGS: unknown flags {:#x}", flags & ~known));
    if ((flags & VIR_DOMAIN_AFFECT_LIVE) && (flags & VIR_DOMAIN_AFFECT_CONFIG)) {
        return rpc::fail(VIR_ERR_INVALID_ARG, "live and config are mutually exclusive");
    }
    if (flags & VIR_DOMAIN_VCPU_GUEST) {
        return rpc::fail(VIR_ERR_ARGUMENT_UNSUPPORTED, "a vmm guest has no guest agent to ask its vCPU count of");
    }
    if ((flags & VIR_DOMAIN_AFFECT_LIVE) && !v.active()) return not_running(v);
    return rpc::ok_i32(static_cast<int32_t>(v.def.vcpus));
}

Reply memory_stats(const DomainView& v, Reader& a, const VmmPid& vmm_pid) {
    auto max = a.u32();
    auto flags = a.u32();
    if (!max || !flags) return undecodable("DOMAIN_MEMORY_STATS");
    if (*max > kMemoryStatsMax || *flags != 0) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("DOMAIN_MEMORY_STATS: maxStats {} (at most {}), flags {:#x} (none)",
                                                          *max, kMemoryStatsMax, *flags));
    }
    auto l = live(v, vmm_pid);
    if (!l) return not_running(v);
    // No balloon: the guest has all its memory while it runs. The vmm's resident set is its
    // RAM's pages touched so far plus vmm itself.
    std::vector<std::pair<int32_t, uint64_t>> stats = {{VIR_DOMAIN_MEMORY_STAT_ACTUAL_BALLOON, v.def.memory_kib}};
    auto status = read_proc_file(fmt::format("/proc/{}/status", l->pid));
    if (auto rss = status ? parse_status_kib(*status, "VmRSS") : std::nullopt) stats.push_back({VIR_DOMAIN_MEMORY_STAT_RSS, *rss});
    if (stats.size() > *max) stats.resize(*max);
    Writer w;
    w.u32(static_cast<uint32_t>(stats.size()));
    for (auto [tag, value] : stats) {
        w.i32(tag);
        w.u64(value);
    }
    return rpc::ok(std::move(w));
}

// domstats' typed parameters for one domain: the groups in `stats`.
std::vector<TypedParam> domain_stats(const DomainView& v, uint32_t stats, const VmmPid& vmm_pid) {
    std::vector<TypedParam> p;
    auto l = live(v, vmm_pid);
    if (stats & VIR_DOMAIN_STATS_STATE) {
        p.push_back({"state.state", int32_t{v.state.state}});
        p.push_back({"state.reason", int32_t{v.state.reason}});
    }
    if ((stats & VIR_DOMAIN_STATS_CPU_TOTAL) && l) {
        p.push_back({"cpu.time", l->process.user_ns + l->process.system_ns});
        p.push_back({"cpu.user", l->process.user_ns});
        p.push_back({"cpu.system", l->process.system_ns});
    }
    if (stats & VIR_DOMAIN_STATS_BALLOON) {
        p.push_back({"balloon.current", uint64_t{v.def.memory_kib}});
        p.push_back({"balloon.maximum", uint64_t{v.def.memory_kib}});
        auto status = l ? read_proc_file(fmt::format("/proc/{}/status", l->pid)) : std::nullopt;
        if (auto rss = status ? parse_status_kib(*status, "VmRSS") : std::nullopt) p.push_back({"balloon.rss", *rss});
    }
    if (stats & VIR_DOMAIN_STATS_VCPU) {
        p.push_back({"vcpu.current", uint32_t{v.def.vcpus}});
        p.push_back({"vcpu.maximum", uint32_t{v.def.vcpus}});
        for (const VcpuThread& t : l ? l->vcpus : std::vector<VcpuThread>{}) {
            p.push_back({fmt::format("vcpu.{}.state", t.index), vcpu_state(t)});
            p.push_back({fmt::format("vcpu.{}.time", t.index), t.stat.user_ns + t.stat.system_ns});
        }
    }
    return p;
}

bool passes(const DomainView& v, uint32_t flags) {
    auto group = [flags](uint32_t a, uint32_t b, bool is_a) {
        if ((flags & (a | b)) == 0) return true;
        return (flags & (is_a ? a : b)) != 0;
    };
    int s = v.state.state;
    uint32_t state_flags = VIR_CONNECT_GET_ALL_DOMAINS_STATS_RUNNING | VIR_CONNECT_GET_ALL_DOMAINS_STATS_PAUSED |
                           VIR_CONNECT_GET_ALL_DOMAINS_STATS_SHUTOFF | VIR_CONNECT_GET_ALL_DOMAINS_STATS_OTHER;
    uint32_t mine = s == VIR_DOMAIN_RUNNING   ? VIR_CONNECT_GET_ALL_DOMAINS_STATS_RUNNING
                    : s == VIR_DOMAIN_PAUSED  ? VIR_CONNECT_GET_ALL_DOMAINS_STATS_PAUSED
                    : s == VIR_DOMAIN_SHUTOFF ? VIR_CONNECT_GET_ALL_DOMAINS_STATS_SHUTOFF
                                              : VIR_CONNECT_GET_ALL_DOMAINS_STATS_OTHER;
    return group(VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE, VIR_CONNECT_GET_ALL_DOMAINS_STATS_INACTIVE, v.active()) &&
           group(VIR_CONNECT_GET_ALL_DOMAINS_STATS_PERSISTENT, VIR_CONNECT_GET_ALL_DOMAINS_STATS_TRANSIENT, v.persistent) &&
           ((flags & state_flags) == 0 || (flags & mine) != 0);
}

Reply all_domain_stats(const DomainStore& store, Reader& a, const VmmPid& vmm_pid) {
    auto n = a.count(kDomainListMax, kNonnullDomainMinBytes);
    if (!n) return undecodable("CONNECT_GET_ALL_DOMAIN_STATS");
    std::vector<DomainView> picked;
    for (uint32_t i = 0; i < *n; ++i) {
        std::string missing;
        auto v = take_domain(store, a, missing);
        if (!v) return missing.empty() ? undecodable("CONNECT_GET_ALL_DOMAIN_STATS") : no_domain(missing);
        picked.push_back(*v);
    }
    auto stats = a.u32();
    auto flags = a.u32();
    if (!stats || !flags) return undecodable("CONNECT_GET_ALL_DOMAIN_STATS");
    uint32_t known = kListFilters | VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT | VIR_CONNECT_GET_ALL_DOMAINS_STATS_BACKING |
                     VIR_CONNECT_GET_ALL_DOMAINS_STATS_ENFORCE_STATS;
    if ((*flags & ~known) != 0) return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("domain stats: unknown flags {:#x}", *flags & ~known));
    if (*n > 0 && (*flags & kListFilters) != 0) {
        return rpc::fail(VIR_ERR_OPERATION_INVALID, "domain stats: list filters apply to all domains, not to a list given");
    }
    if ((*flags & VIR_CONNECT_GET_ALL_DOMAINS_STATS_ENFORCE_STATS) && (*stats & ~kServedStats) != 0) {
        return rpc::fail(VIR_ERR_ARGUMENT_UNSUPPORTED,
                         fmt::format("domain stats groups {:#x} are not served by the vmm driver (it serves state, cpu-total, "
                                     "balloon and vcpu)", *stats & ~kServedStats));
    }
    uint32_t groups = *stats == 0 ? kServedStats : *stats & kServedStats;
    if (*n == 0)
        for (const DomainView& v : store.list())
            if (passes(v, *flags)) picked.push_back(v);
    Writer w;
    w.u32(static_cast<uint32_t>(picked.size()));
    for (const DomainView& v : picked) {
        put_domain(w, v);
        rpc::encode_typed_params(w, domain_stats(v, groups, vmm_pid));
    }
    return rpc::ok(std::move(w));
}

}  // namespace

std::vector<rpc::Procedure> stats_procedures(const DomainStore& store, VmmPid vmm_pid) {
    return {
        {Proc::NODE_GET_CPU_STATS, Access::read_only, node_cpu_stats},
        {Proc::NODE_GET_MEMORY_STATS, Access::read_only, node_memory_stats},
        {Proc::NODE_GET_FREE_MEMORY, Access::read_only, node_free_memory},
        {Proc::NODE_GET_CELLS_FREE_MEMORY, Access::read_only, node_cells_free_memory},
        {Proc::NODE_GET_CPU_MAP, Access::read_only, node_cpu_map},
        {Proc::DOMAIN_GET_MAX_MEMORY, Access::read_only,
         on_domain(store, "DOMAIN_GET_MAX_MEMORY", [](const DomainView& v, Reader&) { return rpc::ok_u64(v.def.memory_kib); })},
        {Proc::DOMAIN_GET_MAX_VCPUS, Access::read_only,
         on_domain(store, "DOMAIN_GET_MAX_VCPUS",
                   [](const DomainView& v, Reader&) { return get_vcpus_flags(v, uint32_t{VIR_DOMAIN_AFFECT_LIVE} | uint32_t{VIR_DOMAIN_VCPU_MAXIMUM}); })},
        {Proc::DOMAIN_GET_VCPUS_FLAGS, Access::read_only, flagged(store, "DOMAIN_GET_VCPUS_FLAGS", get_vcpus_flags)},
        {Proc::DOMAIN_GET_VCPUS, Access::read_only,
         on_domain(store, "DOMAIN_GET_VCPUS", [vmm_pid](const DomainView& v, Reader& a) { return get_vcpus(v, a, vmm_pid); })},
        {Proc::DOMAIN_GET_VCPU_PIN_INFO, Access::read_only,
         on_domain(store, "DOMAIN_GET_VCPU_PIN_INFO",
                   [vmm_pid](const DomainView& v, Reader& a) { return vcpu_pin_info(v, a, vmm_pid); })},
        {Proc::DOMAIN_MEMORY_STATS, Access::read_only,
         on_domain(store, "DOMAIN_MEMORY_STATS", [vmm_pid](const DomainView& v, Reader& a) { return memory_stats(v, a, vmm_pid); })},
        {Proc::CONNECT_GET_ALL_DOMAIN_STATS, Access::read_only,
         [&store, vmm_pid](Caller&, Reader& a) { return all_domain_stats(store, a, vmm_pid); }},
    };
}

}  // namespace vmmd

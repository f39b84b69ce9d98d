#include "vmmd/runtime/proc_stats.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <memory>
#include <sstream>

namespace vmmd {

namespace {

uint64_t ticks_to_ns(uint64_t ticks, long per_second) {
    return per_second > 0 ? ticks * (1000000000ull / static_cast<uint64_t>(per_second)) : 0;
}

std::optional<uint64_t> number(std::string_view s) {
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end == s.data()) return std::nullopt;
    return v;
}

std::vector<std::string_view> words(std::string_view line) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
        size_t start = i;
        while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
        if (i > start) out.push_back(line.substr(start, i - start));
    }
    return out;
}

template <typename F>
void each_line(std::string_view text, F f) {
    while (!text.empty()) {
        size_t nl = text.find('\n');
        f(text.substr(0, nl));
        if (nl == std::string_view::npos) break;
        text.remove_prefix(nl + 1);
    }
}

}  // namespace

std::optional<CpuTimes> parse_cpu_times(std::string_view proc_stat, int cpu, long ticks_per_second) {
    std::string want = cpu < 0 ? "cpu" : "cpu" + std::to_string(cpu);
    std::optional<CpuTimes> found;
    each_line(proc_stat, [&](std::string_view line) {
        auto w = words(line);
        if (found || w.size() < 6 || w[0] != want) return;
        // user nice system idle iowait irq softirq ...: libvirt's "user" counts nice too, and
        // its "kernel" irq and softirq.
        auto field = [&w](size_t i) { return i < w.size() ? number(w[i]).value_or(0) : 0; };
        CpuTimes t;
        t.user_ns = ticks_to_ns(field(1) + field(2), ticks_per_second);
        t.kernel_ns = ticks_to_ns(field(3) + field(6) + field(7), ticks_per_second);
        t.idle_ns = ticks_to_ns(field(4), ticks_per_second);
        t.iowait_ns = ticks_to_ns(field(5), ticks_per_second);
        found = t;
    });
    return found;
}

std::map<std::string, uint64_t> parse_meminfo(std::string_view meminfo) {
    std::map<std::string, uint64_t> out;
    each_line(meminfo, [&out](std::string_view line) {
        size_t colon = line.find(':');
        if (colon == std::string_view::npos) return;
        auto w = words(line.substr(colon + 1));
        if (w.empty()) return;
        if (auto v = number(w[0])) out.emplace(std::string(line.substr(0, colon)), *v);
    });
    return out;
}

std::optional<TaskStat> parse_task_stat(std::string_view stat, long ticks_per_second) {
    // "PID (COMM) STATE ...": the command may hold spaces and parentheses, so it ends at the last ')'.
    size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open) return std::nullopt;
    auto w = words(stat.substr(close + 1));
    // w[0] is field 3 (state); field n is w[n - 3].
    auto field = [&w](size_t n) -> std::optional<uint64_t> { return n - 3 < w.size() ? number(w[n - 3]) : std::nullopt; };
    auto utime = field(14), stime = field(15), processor = field(39);
    if (w.empty() || w[0].size() != 1 || !utime || !stime) return std::nullopt;
    TaskStat t;
    t.comm = std::string(stat.substr(open + 1, close - open - 1));
    t.state = w[0][0];
    t.user_ns = ticks_to_ns(*utime, ticks_per_second);
    t.system_ns = ticks_to_ns(*stime, ticks_per_second);
    t.processor = processor ? static_cast<int>(*processor) : -1;
    return t;
}

std::optional<uint64_t> parse_status_kib(std::string_view status, std::string_view key) {
    std::optional<uint64_t> found;
    each_line(status, [&](std::string_view line) {
        if (found || !line.starts_with(key) || line.size() <= key.size() || line[key.size()] != ':') return;
        auto w = words(line.substr(key.size() + 1));
        if (!w.empty()) found = number(w[0]);
    });
    return found;
}

std::optional<std::vector<int>> parse_cpu_list(std::string_view list) {
    constexpr uint64_t kMaxCpu = 1 << 16;  // far above any host's; bounds a hostile range
    while (!list.empty() && (list.back() == '\n' || list.back() == ' ')) list.remove_suffix(1);
    std::vector<int> out;
    while (!list.empty()) {
        size_t comma = list.find(',');
        std::string_view item = list.substr(0, comma);
        size_t dash = item.find('-');
        auto first = number(item.substr(0, dash));
        auto last = dash == std::string_view::npos ? first : number(item.substr(dash + 1));
        if (!first || !last || *last < *first || *last >= kMaxCpu) return std::nullopt;
        for (uint64_t c = *first; c <= *last; ++c) out.push_back(static_cast<int>(c));
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return out;
}

std::optional<std::string> read_proc_file(const std::string& path) {
    std::ifstream f(path);
    if (!f) return std::nullopt;
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

long clock_ticks() { return ::sysconf(_SC_CLK_TCK); }

std::optional<TaskStat> read_task(pid_t pid, std::optional<pid_t> tid) {
    std::string path = tid ? "/proc/" + std::to_string(pid) + "/task/" + std::to_string(*tid) + "/stat"
                           : "/proc/" + std::to_string(pid) + "/stat";
    auto text = read_proc_file(path);
    if (!text) return std::nullopt;
    return parse_task_stat(*text, clock_ticks());
}

namespace {

std::vector<bool> affinity_of(pid_t tid) {
    cpu_set_t set;
    CPU_ZERO(&set);
    long cpus = ::sysconf(_SC_NPROCESSORS_CONF);
    std::vector<bool> out(static_cast<size_t>(std::max(1L, cpus)), false);
    if (::sched_getaffinity(tid, sizeof set, &set) != 0) return out;
    for (size_t i = 0; i < out.size() && i < CPU_SETSIZE; ++i) out[i] = CPU_ISSET(i, &set);
    return out;
}

}  // namespace

std::vector<VcpuThread> read_vcpu_threads(pid_t pid) {
    std::vector<VcpuThread> out;
    std::string dir = "/proc/" + std::to_string(pid) + "/task";
    std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
    if (!d) return out;
    while (dirent* e = ::readdir(d.get())) {
        auto tid = number(e->d_name);
        if (!tid) continue;
        auto stat = read_task(pid, static_cast<pid_t>(*tid));
        if (!stat || !stat->comm.starts_with("vcpu")) continue;
        auto index = number(std::string_view(stat->comm).substr(4));
        if (!index) continue;  // "vcpu-throttle" and the like
        out.push_back({static_cast<int>(*index), static_cast<pid_t>(*tid), *stat, affinity_of(static_cast<pid_t>(*tid))});
    }
    std::sort(out.begin(), out.end(), [](const VcpuThread& a, const VcpuThread& b) { return a.index < b.index; });
    return out;
}

}  // namespace vmmd

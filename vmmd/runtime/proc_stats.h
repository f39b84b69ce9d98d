// What /proc says of the host and of a vmm process, as libvirt's node and domain statistics
// report them: the host's CPU times and memory, a process's CPU time and resident memory, and its
// vCPU threads (named "vcpuN" by vmm) with their CPU time, last CPU and affinity. The parsers take
// the files' text, so that they are tested without a /proc; the readers open the files.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vmmd {

// One line of /proc/stat ("cpu" or "cpuN"), in ns.
struct CpuTimes {
    uint64_t user_ns = 0, kernel_ns = 0, idle_ns = 0, iowait_ns = 0;
};
// `cpu` -1: the "cpu" line (all CPUs); otherwise "cpuN". nullopt: no such line.
std::optional<CpuTimes> parse_cpu_times(std::string_view proc_stat, int cpu, long ticks_per_second);

// /proc/meminfo's "Key: value kB" lines, in KiB.
std::map<std::string, uint64_t> parse_meminfo(std::string_view meminfo);

// One /proc/PID/stat or /proc/PID/task/TID/stat line.
struct TaskStat {
    std::string comm;
    char state = '?';
    uint64_t user_ns = 0, system_ns = 0;
    int processor = -1;  // the CPU it last ran on
};
std::optional<TaskStat> parse_task_stat(std::string_view stat, long ticks_per_second);

// The value in KiB of `key` ("VmRSS") in a /proc/PID/status text.
std::optional<uint64_t> parse_status_kib(std::string_view status, std::string_view key);

// A kernel CPU list ("0-3,8,10-11", as /sys/devices/system/cpu/online has it): the CPUs named,
// in order; nullopt when it does not parse.
std::optional<std::vector<int>> parse_cpu_list(std::string_view list);

// Readers of the live files.
std::optional<std::string> read_proc_file(const std::string& path);
long clock_ticks();
std::optional<TaskStat> read_task(pid_t pid, std::optional<pid_t> tid = std::nullopt);

struct VcpuThread {
    int index = 0;  // N of "vcpuN"
    pid_t tid = 0;
    TaskStat stat;
    std::vector<bool> affinity;  // one entry a host CPU
};
// The vCPU threads of vmm process `pid`, by index.
std::vector<VcpuThread> read_vcpu_threads(pid_t pid);

}  // namespace vmmd

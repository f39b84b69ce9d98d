// Thread names: every thread vmm starts names itself, so `top -H`, `ps -L`, perf, gdb and
// /proc/PID/task/TID/comm tell the guest's vCPUs from the migration's threads (QEMU does the
// same only with -name debug-threads=on). scripts/bench-rdma.sh reads them to count a
// migration's CPU apart from the guest's.
#pragma once

#include <string>
#include <string_view>

namespace vmm {

// The kernel keeps 15 bytes of a thread's name; longer names are cut to that.
constexpr size_t kThreadNameMax = 15;

// Names the calling thread. A failure changes nothing but the name, so it is not an error.
void name_this_thread(std::string_view name);

// The calling thread's name ("" if it cannot be read).
std::string this_thread_name();

}  // namespace vmm

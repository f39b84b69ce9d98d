// VMM_RDMA_TRACE=1: the protocol as it happens, one line per event on stderr (control messages,
// registrations, unregistrations, drains, each chunk write). For studying the protocol and for
// debugging; off by default and then one branch per call. Each line starts with CLOCK_MONOTONIC
// seconds, as the kernel log does (compare with /proc/uptime), so steps line up across the two
// sides and with what a script did.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <utility>

namespace rdma_migrate {

inline bool tracing() {
    static const bool on = [] {
        const char* v = std::getenv("VMM_RDMA_TRACE");
        return v != nullptr && *v != '\0' && *v != '0';
    }();
    return on;
}

template <typename... Args>
void trace(fmt::format_string<Args...> f, Args&&... args) {
    if (!tracing()) return;
    std::string line = fmt::format(f, std::forward<Args>(args)...);
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    std::fprintf(stderr, "[%5lld.%03ld] rdma-trace: %s\n", static_cast<long long>(now.tv_sec), now.tv_nsec / 1000000,
                 line.c_str());
}

}  // namespace rdma_migrate

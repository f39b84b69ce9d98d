// VMM_RDMA_TRACE=1: the protocol as it happens, one line per event on stderr (control messages,
// registrations, unregistrations, drains, each chunk write). For studying the protocol and for
// debugging; off by default and then one branch per call.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
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
    std::fprintf(stderr, "rdma-trace: %s\n", line.c_str());
}

}  // namespace rdma_migrate

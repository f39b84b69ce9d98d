#include "vmm/common/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace vmm::log {

namespace {
std::atomic<Level> g_level{Level::info};
std::mutex g_mutex;
}  // namespace

void set_level(Level l) { g_level = l; }
Level level() { return g_level; }

void write(Level l, std::string_view message) {
    if (l < g_level) return;
    const char* tag = "";
    switch (l) {
        case Level::debug: tag = "debug: "; break;
        case Level::info: tag = ""; break;
        case Level::warn: tag = "warning: "; break;
        case Level::error: tag = "error: "; break;
    }
    std::lock_guard lock(g_mutex);
    std::fprintf(stderr, "vmm: %s%.*s\n", tag, static_cast<int>(message.size()), message.data());
    std::fflush(stderr);
}

}  // namespace vmm::log

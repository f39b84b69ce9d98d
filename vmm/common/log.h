// Logging to stderr, one line per message, prefixed with the process role ("vmm").
// Only the code that decides what to do with an error logs it.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace vmm::log {

enum class Level { debug, info, warn, error };

void set_level(Level level);
Level level();
void write(Level level, std::string_view message);

template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
    write(Level::info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
    write(Level::warn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
    write(Level::error, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
    if (level() <= Level::debug) write(Level::debug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace vmm::log

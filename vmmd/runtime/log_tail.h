// What a vmm said last: the final line of its log, for the error that reports a failed start.
#pragma once

#include <string>

namespace vmmd {

// The last non-empty line of the file (read from its last 4 KiB), or a note saying there is none.
std::string last_log_line(const std::string& path);

}  // namespace vmmd

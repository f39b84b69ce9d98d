// What a vmm said last: the final line of its log, for the error that reports a failed start.
#pragma once

#include <sys/types.h>

#include <string>

namespace vmmd {

// What a vmm said last from byte `from` of its log on (where this run of it began: the log is
// appended to by every run): its last error line ("error:"), else its last non-empty line (of
// the last 4 KiB), or a note saying there is none. A vmm logs an early failure (a file refused
// on restore) before the line that says what the machine is, so the last line alone would hide it.
std::string last_log_line(const std::string& path, off_t from = 0);
// The log's size now: where the next run's lines will start.
off_t log_size(const std::string& path);

}  // namespace vmmd

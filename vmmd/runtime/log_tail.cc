#include "vmmd/runtime/log_tail.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/common/fd.h"

namespace vmmd {

std::string last_log_line(const std::string& path) {
    constexpr off_t kTail = 4096;
    vmm::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0) return "(no log)";
    off_t from = st.st_size > kTail ? st.st_size - kTail : 0;
    std::string text(static_cast<size_t>(st.st_size - from), '\0');
    ssize_t got = ::pread(fd.get(), text.data(), text.size(), from);
    if (got <= 0) return "(the log is empty)";
    text.resize(static_cast<size_t>(got));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
    if (text.empty()) return "(the log is empty)";
    size_t nl = text.rfind('\n');
    return nl == std::string::npos ? text : text.substr(nl + 1);
}

}  // namespace vmmd

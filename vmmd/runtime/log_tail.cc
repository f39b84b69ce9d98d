#include "vmmd/runtime/log_tail.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "vmm/common/fd.h"

namespace vmmd {

off_t log_size(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

std::string last_log_line(const std::string& path, off_t from) {
    constexpr off_t kTail = 4096;
    vmm::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0) return "(no log)";
    from = std::max(from, st.st_size > kTail ? st.st_size - kTail : off_t{0});
    if (from >= st.st_size) return "(the log is empty)";
    std::string text(static_cast<size_t>(st.st_size - from), '\0');
    ssize_t got = ::pread(fd.get(), text.data(), text.size(), from);
    if (got <= 0) return "(the log is empty)";
    text.resize(static_cast<size_t>(got));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
    if (text.empty()) return "(the log is empty)";
    if (size_t error = text.rfind("error:"); error != std::string::npos) {
        size_t begin = text.rfind('\n', error);
        size_t end = text.find('\n', error);
        begin = begin == std::string::npos ? 0 : begin + 1;
        return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    }
    size_t nl = text.rfind('\n');
    return nl == std::string::npos ? text : text.substr(nl + 1);
}

}  // namespace vmmd

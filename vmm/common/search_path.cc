#include "vmm/common/search_path.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace vmm {

namespace fs = std::filesystem;

std::optional<std::string> SearchPath::find(const std::string& file) const {
    for (const auto& dir : dirs) {
        fs::path p = fs::path(dir) / file;
        std::error_code ec;
        if (fs::exists(p, ec)) return p.string();
    }
    return std::nullopt;
}

std::string SearchPath::describe() const {
    std::string out;
    for (const auto& dir : dirs) out += (out.empty() ? "" : ", ") + dir;
    return out;
}

SearchPath search_path(const char* env_var, std::initializer_list<const char*> under_prefix) {
    SearchPath p;
    if (const char* env = std::getenv(env_var); env != nullptr && *env != '\0') p.dirs.emplace_back(env);
    char exe[PATH_MAX];
    ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        fs::path prefix = fs::path(exe).parent_path().parent_path();
        for (const char* d : under_prefix) p.dirs.push_back((prefix / d).string());
    }
    return p;
}

}  // namespace vmm

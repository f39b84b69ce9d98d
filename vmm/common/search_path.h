// Where vmm finds the files it ships beside its binary (guest payloads, transport plugins): the
// directory an environment variable names, then directories under the binary's prefix (the
// parent of the directory vmm runs from: <build> in a build tree, /usr/local once installed).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace vmm {

struct SearchPath {
    std::vector<std::string> dirs;  // in order
    // dir/file for the first dir that has it.
    std::optional<std::string> find(const std::string& file) const;
    // "dir1, dir2, ...", for an error that says where it looked.
    std::string describe() const;
};

// $env_var (when set and not empty), then <prefix>/d for each of `under_prefix`.
SearchPath search_path(const char* env_var, std::initializer_list<const char*> under_prefix);

}  // namespace vmm

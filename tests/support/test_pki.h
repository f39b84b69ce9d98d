// Test PKIs made by scripts/make-test-pki.sh (certtool) under a directory of the process's own,
// removed when the object goes. Their keys come from the pool the build made ahead
// (VMM_TEST_KEY_POOL, tests/CMakeLists.txt), distinct among one process's PKIs.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace vmm::test {

// The shell command that makes a PKI in `dir` (make-test-pki.sh with `options`), its keys taken
// from the build's pool where there is one.
inline std::string make_test_pki_command(const std::string& dir, const std::string& options = "") {
    std::string cmd = std::string(VMM_SOURCE_DIR) + "/scripts/make-test-pki.sh " + dir + " " + options + " >/dev/null 2>&1";
#ifdef VMM_TEST_KEY_POOL
    if (std::string_view(VMM_TEST_KEY_POOL).size() > 0) cmd = "VMM_TEST_KEY_POOL='" VMM_TEST_KEY_POOL "' " + cmd;
#endif
    return cmd;
}

class TestPki {
public:
    explicit TestPki(const std::string& tag)
        : root_((std::filesystem::temp_directory_path() / (tag + "." + std::to_string(::getpid()))).string()) {}
    ~TestPki() { std::filesystem::remove_all(root_); }
    TestPki(const TestPki&) = delete;
    TestPki& operator=(const TestPki&) = delete;

    // A credentials directory `name` made with make-test-pki.sh's `options` (--server, --client,
    // --ca DIR, --expired): its path, or "" when the script failed.
    std::string make(const std::string& name, const std::string& options = "") const {
        std::string dir = root_ + "/" + name;
        return std::system(make_test_pki_command(dir, options).c_str()) == 0 ? dir : "";
    }

private:
    std::string root_;
};

}  // namespace vmm::test

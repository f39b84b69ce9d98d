// Test PKIs made by scripts/make-test-pki.sh (certtool) under a directory of the process's own,
// removed when the object goes.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace vmm::test {

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
        std::string cmd = std::string(VMM_SOURCE_DIR) + "/scripts/make-test-pki.sh " + dir + " " + options + " >/dev/null";
        return std::system(cmd.c_str()) == 0 ? dir : "";
    }

private:
    std::string root_;
};

}  // namespace vmm::test

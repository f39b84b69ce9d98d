// A QEMU 7.2 process as a migration peer nobody here wrote: 64 MiB and nothing to boot, driven
// over QMP (what its migration moves does not matter to the tests that use it).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace vmm::test {

class Qemu {
public:
    // `extra`: more arguments, e.g. {"-incoming", URI} or a -object.
    static std::unique_ptr<Qemu> start(const std::string& name, const std::vector<std::string>& extra);
    Json qmp(const std::string& name, const Json& args = Json::object()) { return qmp_->execute(name, args); }
    // query-migrate's status once it is neither setup nor active (waits up to `seconds`).
    std::string migration_outcome(int seconds);
    std::string log() { return read_text_file(log_); }
    VmmProcess& process() { return *proc_; }

private:
    Qemu() = default;
    std::unique_ptr<VmmProcess> proc_;
    std::unique_ptr<QmpClient> qmp_;
    std::string sock_, log_;
};

}  // namespace vmm::test

#include "tests/support/qemu.h"

#include "tests/support/wait.h"

namespace vmm::test {

std::unique_ptr<Qemu> Qemu::start(const std::string& name, const std::vector<std::string>& extra) {
    auto q = std::unique_ptr<Qemu>(new Qemu);
    q->sock_ = temp_path(name + ".qmp");
    q->log_ = temp_path(name + ".log");
    std::vector<std::string> argv{"qemu-system-x86_64", "-machine", "pc,accel=kvm:tcg", "-m", "64", "-nodefaults",
                                  "-no-user-config", "-display", "none", "-S", "-qmp",
                                  "unix:" + q->sock_ + ",server=on,wait=off"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    q->proc_ = VmmProcess::spawn_program(argv, q->log_);
    if (!q->proc_) return nullptr;
    // QEMU sets up -incoming during start-up, before its monitor answers.
    eventually([&] { return (q->qmp_ = QmpClient::connect(q->sock_)) != nullptr; }, 60);
    if (!q->qmp_) return nullptr;
    return q;
}

std::string Qemu::migration_outcome(int seconds) {
    std::string status;
    eventually([&] {
        Json r = qmp("query-migrate");
        status = r.contains("return") && r["return"].contains("status") ? r["return"]["status"].get<std::string>() : "";
        return status != "" && status != "setup" && status != "active";
    }, seconds);
    return status;
}

}  // namespace vmm::test

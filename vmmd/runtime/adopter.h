// Adopter: the vmm processes an earlier vmmd left running, taken over by a restarted one without
// holding up its server. Each recorded process that still runs is put under watch at once (it
// cannot be started twice) and reached over QMP by a thread of its own; one that does not answer
// is shown "paused (unknown)", its pid kept, until it does (destroy works meanwhile). Then what
// the vmm says and the recorded phase decide what becomes of it (adoption.h). A run record that
// cannot be read is kept, and the domain cannot be started while it is there, unless the vmm
// behind its QMP socket is found and adopted.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "vmmd/domain/domain_store.h"
#include "vmmd/runtime/running_vmm.h"

namespace vmmd {

class Supervisor;

class Adopter {
public:
    Adopter(const std::string& state_dir, DomainStore& store, RunningVmms& vmms, Supervisor& supervisor)
        : state_dir_(state_dir), store_(store), vmms_(vmms), sup_(supervisor) {}
    ~Adopter() { join(); }
    Adopter(const Adopter&) = delete;
    Adopter& operator=(const Adopter&) = delete;

    // Every record in <state>/run: adopted, or `warn` hears why not.
    void adopt_all(const std::function<void(const std::string&)>& warn);
    // The adopters' threads joined (once vmmd stops: RunningVmms::stop ends their waits).
    void join();

private:
    // A record that does not read: the vmm behind the domain's QMP socket, with its stored definition.
    Status adopt_unreadable(const std::string& record_path, const vmm::Error& why);
    Status adopt_process(const DomainDef& def, int id, DomainState state, MigrationPhase phase, ProcessIdentity who);
    // The adopted vmm's thread: reaches its QMP socket, then settles it.
    void attach(const std::shared_ptr<RunningVmm>& r, DomainState recorded);
    void settle(const std::shared_ptr<RunningVmm>& r, DomainState recorded);

    const std::string& state_dir_;
    DomainStore& store_;
    RunningVmms& vmms_;
    Supervisor& sup_;
    std::mutex mutex_;
    std::vector<std::thread> threads_;  // under mutex_
};

}  // namespace vmmd

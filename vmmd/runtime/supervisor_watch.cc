// The Supervisor's watcher: one thread, every vmm's pidfd and the wake-up eventfd in one poll.
#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <poll.h>
#include <unistd.h>

#include <filesystem>

#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"
#include "vmmd/domain/atomic_file.h"
#include "vmmd/domain/domain_xml.h"
#include "vmmd/runtime/run_record.h"
#include "vmmd/runtime/supervisor.h"

namespace vmmd {

using vmm::Error;

namespace {

std::string describe(const ProcessEnding& e) {
    switch (e.kind) {
        case ProcessEnding::Kind::exited: return fmt::format("exited with status {}", e.value);
        case ProcessEnding::Kind::killed: return fmt::format("was killed by signal {}", e.value);
        case ProcessEnding::Kind::unknown: break;
    }
    return "ended (how is unknown: it was started by an earlier vmmd)";
}

}  // namespace

void Supervisor::watch_loop() {
    vmm::name_this_thread("vmmd-watch");
    for (;;) {
        std::vector<pollfd> fds{{wake_.get(), POLLIN, 0}};
        std::vector<std::shared_ptr<Running>> who;
        {
            std::lock_guard lock(mutex_);
            if (stopping_) return;
            for (const auto& [uuid, r] : running_) {
                fds.push_back({r->process->pidfd(), POLLIN, 0});
                who.push_back(r);
            }
        }
        int n = ::poll(fds.data(), fds.size(), -1);
        if (n < 0) {
            if (errno != EINTR) vmm::log::error("vmmd: {}", Error::from_errno("poll the vmm processes").message());
            continue;
        }
        if ((fds[0].revents & POLLIN) != 0) {
            uint64_t count;
            (void)!::read(wake_.get(), &count, sizeof count);
        }
        for (size_t i = 0; i < who.size(); ++i)
            if (fds[i + 1].revents != 0) ended(who[i]);
    }
}

void Supervisor::ended(const std::shared_ptr<Running>& r) {
    ProcessEnding how = r->process->reap();
    Intent intent = r->intent;
    DomainState state{VIR_DOMAIN_SHUTOFF, VIR_DOMAIN_SHUTOFF_CRASHED};
    LifecycleEvent event{VIR_DOMAIN_EVENT_STOPPED, VIR_DOMAIN_EVENT_STOPPED_CRASHED};
    if (intent == Intent::migrated) {
        state.reason = VIR_DOMAIN_SHUTOFF_MIGRATED;
        event.detail = VIR_DOMAIN_EVENT_STOPPED_MIGRATED;
    } else if (intent == Intent::saved) {
        state.reason = VIR_DOMAIN_SHUTOFF_SAVED;
        event.detail = VIR_DOMAIN_EVENT_STOPPED_SAVED;
    } else if (intent == Intent::failed || (intent == Intent::none && r->phase == MigrationPhase::incoming)) {
        // An incoming migration or restore that failed, was cancelled, or whose vmm gave up.
        state.reason = VIR_DOMAIN_SHUTOFF_FAILED;
        event.detail = VIR_DOMAIN_EVENT_STOPPED_FAILED;
    } else if (intent == Intent::destroy) {
        state.reason = VIR_DOMAIN_SHUTOFF_DESTROYED;
        event.detail = VIR_DOMAIN_EVENT_STOPPED_DESTROYED;
    } else if (intent == Intent::shutdown || (how.kind == ProcessEnding::Kind::exited && how.value == 0)) {
        // Asked to end, or the guest powered itself off (the control device's exit, status 0).
        state.reason = VIR_DOMAIN_SHUTOFF_SHUTDOWN;
        event.detail = VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN;
    }
    const Uuid& uuid = r->def.uuid;
    ::unlink(run_path(uuid, ".json").c_str());
    ::unlink(run_path(uuid, ".qmp").c_str());
    store_.set_stopped(uuid, state);
    {
        std::lock_guard lock(mutex_);
        if (auto it = running_.find(uuid); it != running_.end() && it->second == r) running_.erase(it);
    }
    stopped_.notify_all();
    bool crashed = state.reason == VIR_DOMAIN_SHUTOFF_CRASHED;
    const char* why = crashed ? "crashed" : state.reason == VIR_DOMAIN_SHUTOFF_FAILED ? "failed" : "in order";
    std::string line = fmt::format("vmmd: domain '{}' (id {}): vmm (pid {}) {}; the domain is shut off ({})", r->def.name, r->id,
                                   r->process->identity().pid, describe(how), why);
    if (crashed) vmm::log::warn("{}, see {}", line, log_path(r->def));
    else vmm::log::info("{}", line);
    announce(r->def, r->id, event);
}

}  // namespace vmmd

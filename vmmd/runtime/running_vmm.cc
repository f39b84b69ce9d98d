#include "vmmd/runtime/running_vmm.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"
#include "vmmd/domain/atomic_file.h"
#include "vmmd/domain/domain_xml.h"
#include "vmmd/runtime/log_tail.h"

namespace vmmd {

using vmm::Error;
using vmm::monitor::QmpClient;

Result<std::unique_ptr<QmpClient>> RunningVmm::connect(const VmmProcess& p, const std::string& socket,
                                                       const std::string& log, off_t log_from,
                                                       std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (p.ended()) {
            return Error(fmt::format("vmm (pid {}) ended before its QMP socket answered: {} (log: {})", p.identity().pid,
                                     last_log_line(log, log_from), log));
        }
        auto q = QmpClient::connect(socket, std::chrono::milliseconds(100));
        if (q) return q;
        if (std::chrono::steady_clock::now() > deadline) {
            return Error(fmt::format("vmm (pid {}) did not answer on {} within {} s: {} (log: {})", p.identity().pid, socket,
                                     timeout.count(), q.error().message(), log));
        }
    }
}

Result<Json> RunningVmm::call(const std::string& command, const Json& args) {
    std::unique_lock lock(qmp_mutex_);
    // Adopted a moment ago by a restarted vmmd: its first attempt to reach the vmm is under way.
    qmp_settled_.wait_for(lock, kAdoptAttempt + std::chrono::seconds(1), [this] { return qmp_ || silent_; });
    if (!qmp_) {
        return Error(fmt::format("domain '{}': its vmm (pid {}) has not answered on its QMP socket since vmmd started; "
                                 "vmmd keeps trying ('virsh destroy' ends it meanwhile)",
                                 def.name, process->identity().pid));
    }
    auto a = qmp_->execute(command, args);
    if (!a) return Error(fmt::format("domain '{}': {}", def.name, a.error().message()));
    return a;
}

void RunningVmm::answered(std::unique_ptr<QmpClient> client) {
    std::lock_guard lock(qmp_mutex_);
    qmp_ = std::move(client);
    silent_ = false;
    qmp_settled_.notify_all();
}

void RunningVmm::went_silent() {
    std::lock_guard lock(qmp_mutex_);
    silent_ = true;
    qmp_settled_.notify_all();
}

void RunningVmm::relay_events(std::unique_ptr<VmmEvents> events) {
    std::lock_guard lock(events_mutex_);
    events_ = std::move(events);
}

Status RunningVmm::record(const std::string& path, DomainState state) const {
    RunRecord rec{process->identity(), id, state, format_domain_xml(def), phase.load()};
    return write_file_atomically(path, encode_run_record(rec));
}

Result<std::unique_ptr<RunningVmms>> RunningVmms::create(Ended ended) {
    UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake.valid()) return Error::from_errno("eventfd");
    std::unique_ptr<RunningVmms> s(new RunningVmms(std::move(ended), std::move(wake)));
    s->watcher_ = std::thread([p = s.get()] { p->loop(); });
    return s;
}

RunningVmms::~RunningVmms() {
    stop();
    if (watcher_.joinable()) watcher_.join();
}

void RunningVmms::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    stopping_cv_.notify_all();
    wake();
}

bool RunningVmms::stopping() const {
    std::lock_guard lock(mutex_);
    return stopping_;
}

void RunningVmms::wait_or_stop(std::chrono::milliseconds d) {
    std::unique_lock lock(mutex_);
    stopping_cv_.wait_for(lock, d, [this] { return stopping_; });
}

void RunningVmms::wake() const {
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
}

std::shared_ptr<RunningVmm> RunningVmms::find(const Uuid& uuid) const {
    std::lock_guard lock(mutex_);
    auto it = running_.find(uuid);
    return it == running_.end() ? nullptr : it->second;
}

std::optional<std::string> RunningVmms::reserve(const DomainDef& def, const std::string& record) {
    std::lock_guard lock(mutex_);
    if (running_.count(def.uuid) != 0 || starting_.count(def.uuid) != 0) {
        return fmt::format("domain '{}' is already running", def.name);
    }
    if (::access(record.c_str(), F_OK) == 0) {
        return fmt::format("domain '{}' has a run record vmmd could not adopt ({}; its log says why): a vmm may still run "
                           "it. End that vmm if there is one, remove the file, then start the domain",
                           def.name, record);
    }
    starting_[def.uuid] = true;
    return std::nullopt;
}

void RunningVmms::unreserve(const Uuid& uuid) {
    std::lock_guard lock(mutex_);
    starting_.erase(uuid);
}

int RunningVmms::next_id() {
    std::lock_guard lock(mutex_);
    return next_id_++;
}

void RunningVmms::ids_above(int id) {
    std::lock_guard lock(mutex_);
    next_id_ = std::max(next_id_, id + 1);
}

void RunningVmms::add(std::shared_ptr<RunningVmm> r) {
    {
        std::lock_guard lock(mutex_);
        running_[r->def.uuid] = std::move(r);
    }
    wake();
}

void RunningVmms::remove(const std::shared_ptr<RunningVmm>& r) {
    {
        std::lock_guard lock(mutex_);
        if (auto it = running_.find(r->def.uuid); it != running_.end() && it->second == r) running_.erase(it);
    }
    stopped_.notify_all();
}

bool RunningVmms::wait_stopped(const Uuid& uuid, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return stopped_.wait_for(lock, timeout, [&] { return running_.count(uuid) == 0; });
}

void RunningVmms::loop() {
    vmm::name_this_thread("vmmd-watch");
    for (;;) {
        std::vector<pollfd> fds{{wake_.get(), POLLIN, 0}};
        std::vector<std::shared_ptr<RunningVmm>> who;
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
            if (fds[i + 1].revents != 0) ended_(who[i]);
    }
}

}  // namespace vmmd

// RunningVmm: one running domain's vmm as vmmd holds it: its definition and domain id, the
// process, its QMP connection (one command at a time), why vmmd expects it to end, and the phase
// of a migration it is in. RunningVmms: the set of them, and the one thread that notices any of
// them ending: every process's pidfd and a wake-up eventfd in one poll.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "vmm/common/fd.h"
#include "vmm/monitor/client/qmp_client.h"
#include "vmmd/domain/domain_store.h"
#include "vmmd/runtime/run_record.h"
#include "vmmd/runtime/vmm_events.h"
#include "vmmd/runtime/vmm_process.h"

namespace vmmd {

using vmm::monitor::Json;

class RunningVmm {
public:
    // Why vmmd expects the process to end: it decides the state the domain is left in.
    enum class Intent { none, shutdown, destroy, migrated, saved, failed };
    // How long a call waits for an adopted vmm's first connection attempt.
    static constexpr std::chrono::seconds kAdoptAttempt{2};

    RunningVmm(DomainDef d, int domain_id, std::unique_ptr<VmmProcess> p, MigrationPhase ph)
        : def(std::move(d)), id(domain_id), process(std::move(p)), phase(ph) {}

    // Spawns `argv`'s vmm, logging to `log` (this run's lines from `log_from`), and waits up to
    // `timeout` for its QMP socket to answer; a vmm that ends first is an error with its last log line.
    static Result<std::unique_ptr<vmm::monitor::QmpClient>> connect(const VmmProcess& p, const std::string& socket,
                                                                    const std::string& log, off_t log_from,
                                                                    std::chrono::seconds timeout);
    // One QMP command (an {"error"} answer is an Error with its desc). A call made while an
    // adopted vmm's first connection attempt is under way waits for it.
    Result<Json> call(const std::string& command, const Json& args = Json::object());
    // An adopted vmm answered on its QMP socket (`client`), or has not yet (silent).
    void answered(std::unique_ptr<vmm::monitor::QmpClient> client);
    void went_silent();
    // Its events, relayed from now on for as long as it runs (or this object lives).
    void relay_events(std::unique_ptr<VmmEvents> events);
    // Writes (or rewrites) its run record at `path`.
    Status record(const std::string& path, DomainState state) const;

    const DomainDef def;
    const int id;
    const std::unique_ptr<VmmProcess> process;
    std::atomic<Intent> intent{Intent::none};
    std::atomic<MigrationPhase> phase{MigrationPhase::none};

private:
    std::mutex qmp_mutex_;  // one command at a time on the socket
    std::unique_ptr<vmm::monitor::QmpClient> qmp_;  // null while an adopted vmm has not answered
    // An adopted vmm's first connection attempt: answered (qmp_ set) or failed (silent_). A call
    // made meanwhile waits for it, as libvirt's calls wait for its reconnection to a domain.
    std::condition_variable qmp_settled_;
    bool silent_ = false;  // under qmp_mutex_
    std::mutex events_mutex_;
    std::unique_ptr<VmmEvents> events_;  // under events_mutex_; joined with this object
};

class RunningVmms {
public:
    using Ended = std::function<void(const std::shared_ptr<RunningVmm>&)>;

    // The watcher starts polling; `ended` runs on it for each vmm that ends (after reaping is its to do).
    static Result<std::unique_ptr<RunningVmms>> create(Ended ended);
    ~RunningVmms();  // stops and joins the watcher
    RunningVmms(const RunningVmms&) = delete;
    RunningVmms& operator=(const RunningVmms&) = delete;

    std::shared_ptr<RunningVmm> find(const Uuid& uuid) const;
    // Marks `def` as starting, or says why it cannot start: it runs or starts already, or a run
    // record nobody adopted is there (`record`: its path).
    std::optional<std::string> reserve(const DomainDef& def, const std::string& record);
    void unreserve(const Uuid& uuid);
    // The next domain id; ids_above(id): ids from then on are above an adopted domain's.
    int next_id();
    void ids_above(int id);
    // Under watch from now on; removed (if still the one for its uuid) once it ended.
    void add(std::shared_ptr<RunningVmm> r);
    void remove(const std::shared_ptr<RunningVmm>& r);
    // Waits until `uuid` does not run (true) or `timeout` passes (false).
    bool wait_stopped(const Uuid& uuid, std::chrono::milliseconds timeout);
    // vmmd stops: waits between attempts end, and nothing is watched any more.
    void stop();
    bool stopping() const;
    // Waits `d`, or less if vmmd stops meanwhile.
    void wait_or_stop(std::chrono::milliseconds d);

private:
    RunningVmms(Ended ended, UniqueFd wake) : ended_(std::move(ended)), wake_(std::move(wake)) {}
    void loop();
    void wake() const;

    Ended ended_;
    UniqueFd wake_;  // eventfd: the watcher re-reads the set of processes, or stops
    mutable std::mutex mutex_;
    std::condition_variable stopped_;   // a vmm left the set
    std::condition_variable stopping_cv_;
    std::map<Uuid, std::shared_ptr<RunningVmm>> running_;
    std::map<Uuid, bool> starting_;  // a start in progress: a second one is refused
    int next_id_ = 1;
    bool stopping_ = false;
    std::thread watcher_;
};

}  // namespace vmmd

#include "vmm/migration/session/mapped_guard.h"

#include <fmt/format.h>

#include "vmm/common/elapsed.h"
#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"

namespace vmm::migration {

namespace {
constexpr auto kCheckWait = std::chrono::seconds(30);  // under the kernel's lease-break-time (45 s)
}

Result<std::unique_ptr<MappedFileGuard>> MappedFileGuard::create(machine::Machine& m, int fd, std::string what,
                                                                  FailFn on_failure) {
    std::unique_ptr<MappedFileGuard> g(new MappedFileGuard(m, std::move(what), std::move(on_failure)));
    MappedFileGuard* self = g.get();
    auto lease = FileLease::take(fd, g->what_, [self] {
        std::lock_guard lock(self->mutex_);
        self->broke_ = true;
        self->cv_.notify_all();
    });
    if (!lease) return lease.error();
    g->lease_ = std::move(*lease);
    g->thread_ = std::thread([self] { self->run(); });
    return g;
}

MappedFileGuard::~MappedFileGuard() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
        cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    lease_.reset();  // after the thread: a break's callback never meets a guard that is going
}

void MappedFileGuard::check_done() {
    std::lock_guard lock(mutex_);
    checked_ = true;
    cv_.notify_all();
}

void MappedFileGuard::run() {
    name_this_thread("restore-guard");
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return broke_ || stop_; });
    if (stop_) return;
    lock.unlock();
    log::warn("{}: another process is about to change the file this guest's RAM is mapped from; copying the RAM out of "
              "it first (x-restore-mapped)",
              what_);
    if (auto s = copy_out(); !s) {
        on_failure_(Error(fmt::format("{}: another process is about to change the file this guest's RAM is mapped "
                                      "from, and copying the RAM out of it failed: {}",
                                      what_, s.error().message())));
        return;  // the machine ends; the lease goes with the guard
    }
    lock.lock();
    // The check reads the rest of the file as it was saved before it may change.
    if (!cv_.wait_for(lock, kCheckWait, [this] { return checked_ || stop_; })) {
        log::warn("{}: the check of the saved RAM had not finished after {} s; the file may now change under it",
                  what_, kCheckWait.count());
    }
    lease_->release();
}

Status MappedFileGuard::copy_out() {
    auto t = SteadyClock::now();
    bool was_running = machine_.run().state() == machine::RunState::running;
    machine_.run().refuse_resume(fmt::format("the guest's RAM is being copied out of {}, which another process is about to "
                                       "change: a moment",
                                       what_));
    if (was_running) machine_.run().pause();
    Status s;
    for (const auto& b : machine_.memory().blocks()) {
        if (s = b->copy_out_of_file(); !s) break;
    }
    machine_.run().refuse_resume("");
    if (s && was_running) s = machine_.run().resume();
    if (s) log::info("{}: the guest's RAM no longer maps it ({:.0f} ms, the guest paused)", what_, ms_between(t, SteadyClock::now()));
    return s;
}

}  // namespace vmm::migration

#include "vmmd/server/call_workers.h"

#include "vmm/common/thread_name.h"

namespace vmmd {

void CallWorkers::run(std::function<void()> call) {
    std::unique_lock lock(mutex_);
    // After reaping, every worker left runs a call: the list is what runs.
    changed_.wait(lock, [this] {
        reap_locked();
        return workers_.size() < limit_;
    });
    Worker& w = workers_.emplace_back();
    w.thread = std::thread([this, &w, call = std::move(call)] {
        vmm::name_this_thread("vmmd-call");
        call();
        std::lock_guard done(mutex_);
        w.done = true;
        changed_.notify_all();
    });
}

void CallWorkers::wait_all() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] {
        reap_locked();
        return workers_.empty();
    });
}

void CallWorkers::reap_locked() {
    for (auto it = workers_.begin(); it != workers_.end();) {
        if (!it->done) {
            ++it;
            continue;
        }
        it->thread.join();  // its call returned and it holds no lock: the join is immediate
        it = workers_.erase(it);
    }
}

}  // namespace vmmd

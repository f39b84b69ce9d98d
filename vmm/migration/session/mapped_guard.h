// MappedFileGuard: a guest whose RAM is mapped from its saved file (x-restore-mapped) must never
// run on pages that are not the saved ones, and must not read past a file that shrank (the kernel
// would end vmm with SIGBUS). The guard holds a read lease on the file (common/file_lease.h):
// when another process is about to open it for writing or truncate it, the guest pauses, its RAM
// is copied out of the file into anonymous memory at the same addresses, and it runs on; the
// lease goes once the background check (restore-check) has read the rest of the file as it was
// saved, or after 30 s (the kernel waits 45 at most). The other process then goes on.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "vmm/common/file_lease.h"
#include "vmm/machine/machine.h"

namespace vmm::migration {

class MappedFileGuard {
public:
    using FailFn = std::function<void(const Error&)>;
    // Takes the lease on `fd` (the file `what` names); fails, saying why, where the file cannot be
    // guarded (open for writing elsewhere, not this user's, no leases on its file system).
    // `on_failure`: the copy failed while the file was about to change (ends the machine).
    static Result<std::unique_ptr<MappedFileGuard>> create(machine::Machine& m, int fd, std::string what, FailFn on_failure);
    ~MappedFileGuard();
    MappedFileGuard(const MappedFileGuard&) = delete;
    MappedFileGuard& operator=(const MappedFileGuard&) = delete;

    // The background check has read the whole file: at a break the lease may go at once.
    void check_done();

private:
    MappedFileGuard(machine::Machine& m, std::string what, FailFn on_failure)
        : machine_(m), what_(std::move(what)), on_failure_(std::move(on_failure)) {}
    void run();
    Status copy_out();  // the guest paused, every file-backed block copied, the guest as it was

    machine::Machine& machine_;
    std::string what_;
    FailFn on_failure_;
    std::unique_ptr<FileLease> lease_;
    std::mutex mutex_;
    std::condition_variable cv_;
    bool broke_ = false, checked_ = false, stop_ = false;
    std::thread thread_;  // last: started once the rest is set
};

}  // namespace vmm::migration

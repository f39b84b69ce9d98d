// FileLease: a read lease on an open file (fcntl F_SETLEASE). Before another process may open
// the file for writing or truncate it, the kernel tells the holder (SIGIO, naming the file
// descriptor) and waits until the holder lets go, for at most /proc/sys/fs/lease-break-time
// seconds (45 by default). A guest whose RAM is mapped from a file (x-restore-mapped) is
// guarded by one: told in time, it copies what it maps before the file changes under it.
//
// The signal is read by SignalWatcher (signal_watcher.h), which blocks it in every thread; a
// lease is refused where no watcher does (the signal would end the process).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "vmm/common/fd.h"
#include "vmm/common/result.h"

namespace vmm {

class FileLease {
public:
    // A lease on a read-only duplicate of `fd` (the file `path`). `on_break` runs on the signals
    // thread when another process wants to change the file: it must return quickly (hand the
    // work to a thread of its own) and call release() once the file may change.
    static Result<std::unique_ptr<FileLease>> take(int fd, std::string path, std::function<void()> on_break);
    ~FileLease();  // lets go
    FileLease(const FileLease&) = delete;
    FileLease& operator=(const FileLease&) = delete;

    // Lets go: the process waiting to change the file goes on.
    void release();
    // SignalWatcher's: the kernel's lease signal came for `fd`.
    static void broken(int fd);

private:
    FileLease(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
    UniqueFd fd_;
    std::string path_;
};

}  // namespace vmm

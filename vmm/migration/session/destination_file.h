// FileRestore: an incoming migration from a saved file that runs the guest before it has read
// every page: a mapped restore (x-restore-mapped: guest RAM becomes the file's, guarded by a
// lease, its check on a thread of its own) or a lazy one (x-restore-lazy: userfaultfd brings the
// pages the guest touches first). It owns the guard, the check's thread and the lazy restore.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "vmm/migration/postcopy/lazy_restore.h"
#include "vmm/migration/session/destination_core.h"
#include "vmm/migration/session/mapped_guard.h"
#include "vmm/migration/transport/file_ram.h"

namespace vmm::migration {

class FileRestore {
public:
    explicit FileRestore(DestinationCore& core) : core_(core) {}
    ~FileRestore();  // the check cancelled and joined, then the guard goes
    FileRestore(const FileRestore&) = delete;
    FileRestore& operator=(const FileRestore&) = delete;

    // Guest RAM becomes the file's, and its check starts (a damaged page ends the machine
    // through on_failure).
    Status map(FileRam ram);
    // The guest runs (or waits, paused) after `ready_and_go` while its RAM comes in from the file,
    // the pages it touches first; a damaged page or a failed read ends the restore.
    Status receive_lazy(stream::ByteStream& st, const std::vector<BlockInfo>& blocks, LazyFileRam file,
                        const std::function<Status()>& ready_and_go);
    // A lazy restore's figures into `s` (under core.mutex); false when there is none.
    bool report(MigrationStats& s) const;

private:
    DestinationCore& core_;
    std::unique_ptr<LazyRestore> lazy_;                // under core.mutex for readers
    double lazy_ready_ms_ = 0;                         // under core.mutex: its guest could run this long after start
    std::unique_ptr<MappedFileGuard> guard_;           // a mapped restore's lease on its file (outlives the check)
    std::optional<stream::CancelToken> check_cancel_;  // a mapped restore's check: cancelled and joined last
    std::thread checker_;
};

}  // namespace vmm::migration

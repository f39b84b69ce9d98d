// What only the file transport (file_transport.h) gives, reached through the seam's capability
// calls (Connection::save_target(), DestRamChannel::file_ram()) rather than through methods every
// connection and channel would carry.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/stream/cancel.h"

namespace vmm::migration {

// Where a destination's channel leaves guest RAM in a file, to be mapped rather than read (a
// mapped restore, x-restore-mapped).
struct FileRam {
    int fd = -1;                    // valid while the connection lives (a mapping keeps its own reference)
    std::vector<uint64_t> offsets;  // per block: where its pages start in the file
    // Every page of the file against its sum, run on a thread of the caller's while the guest
    // runs (it outlives the connection): the first damaged page, or cancelled.
    std::function<Status(const stream::CancelToken& cancel)> check;
};

// Where a destination's channel leaves guest RAM in a file, to be brought in on demand while the
// guest runs (a lazy restore, x-restore-lazy): nothing was read in the rounds. Both functions
// are thread-safe and outlive the connection.
struct LazyFileRam {
    // Block i's bytes [offset, offset + into.size()) (whole pages) into `into`, each page checked
    // against the sum saved with it: a damaged page is an error naming it.
    std::function<Status(uint32_t block, uint64_t offset, std::span<uint8_t> into)> read;
    // Block i's ranges [from, to) that hold data, in file order: every other page is a zero page.
    std::function<Result<std::vector<std::pair<uint64_t, uint64_t>>>(uint32_t block)> extents;
    // Where the guest cannot run first (no userfaultfd here): all of RAM read in place and checked,
    // as a restore that is not lazy reads it. Only while the connection lives.
    std::function<Status()> read_all;
    // The background fill's read, bytes (0: LazyRestore's own, 1 MiB): larger where each read
    // costs a round trip that several reads at once hide (a pull's).
    uint64_t piece = 0;
};

// A destination channel that leaves guest RAM in a file (a restore from file:PATH).
class FileRamSource {
public:
    virtual ~FileRamSource() = default;
    // After the rounds: the file guest RAM is to be mapped from (nothing was read), or none.
    virtual std::optional<FileRam> mapped() = 0;
    // After the rounds: the file guest RAM is to be brought in from lazily, or none.
    virtual std::optional<LazyFileRam> lazy() = 0;
};

// A source connection that is a save (migrate file:PATH): nobody answers, and what is written
// becomes the saved guest only at commit().
class SaveTarget {
public:
    virtual ~SaveTarget() = default;
    // The source has written everything: synced, then given its name; until then nothing that
    // looks like a save exists.
    virtual Status commit() = 0;
    // A save that builds on an earlier one (an incremental save): that save's id. The source
    // then sends only what its dirty log says changed since, so the earlier save must be the
    // last this vmm made.
    virtual std::optional<uint64_t> builds_on() const = 0;
    // Its own id, once committed (what a later incremental save names as its base).
    virtual uint64_t save_id() const = 0;
};

}  // namespace vmm::migration

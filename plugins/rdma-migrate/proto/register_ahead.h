// RegisterAhead: the order of a source's round under dynamic registration without
// rdma-pin-limit (beyond the spec). The spec asks the destination to register each chunk just
// before writing it, so the link idles while the destination pins. Here the pieces to write
// queue up; the chunks they need are asked for in groups, and while the destination registers
// one group the writes of the group before it are on the wire:
//
//   source:       ask g1 ............ ask g2, write g1 ...... ask g3, write g2 ......
//   destination:         pin g1, answer        pin g2, answer         pin g3, answer
//
// Pieces are written in the order they were queued; every chunk is asked for once. Only the
// bookkeeping lives here (no verbs), so it is tested without a device.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <set>
#include <vector>

#include "chunks.h"
#include "registration_cache.h"

namespace rdma_migrate {

// Bytes of chunks per REGISTER REQUEST: big enough that asking costs little per byte, small
// enough that the first writes start soon.
constexpr uint64_t kRegisterAheadBytes = 16 << 20;

struct QueuedPiece {
    uint32_t block;
    Piece piece;
};

class RegisterAhead {
public:
    using Registered = std::function<bool(const ChunkKey&)>;
    // `group`: chunks per REGISTER REQUEST (1 .. kMaxRepeat).
    explicit RegisterAhead(size_t group);

    // Queues one range's pieces; chunks not `registered` yet become due to be asked for.
    void add(uint32_t block, const std::vector<Piece>& pieces, const Registered& registered);
    // Whether a group should be asked for now: a whole group is waiting, or (at the end of
    // the round, `final`) anything is.
    bool ask_due(bool final) const { return final ? !unasked_.empty() : unasked_.size() >= group_; }
    // The next group to ask for (at most `group` chunks, in the order they were queued).
    std::vector<ChunkKey> take_ask();
    // The pieces at the front of the queue whose chunks are registered, in order; the queue
    // stops at the first piece still waiting for its chunk.
    std::vector<QueuedPiece> take_ready(const Registered& registered);
    bool empty() const { return queue_.empty() && unasked_.empty(); }
    size_t queued() const { return queue_.size(); }

private:
    size_t group_;
    std::deque<QueuedPiece> queue_;
    std::deque<ChunkKey> unasked_;  // due to be asked for, in order
    std::set<ChunkKey> wanted_;     // unasked or asked, not yet seen registered
};

}  // namespace rdma_migrate

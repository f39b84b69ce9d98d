// RemoteRegistrations: the chunks of the destination's RAM that it has registered for the
// source's writes, and how the source asks for them (spec: "Migration of VM's ram", Register
// request/result; TODO 1 and 4: bounded pinning). Two ways:
//   - a group ahead of the writes (RegisterAhead), the default: the destination pins the next
//     group while this one's writes are on the wire (queue, finish);
//   - just before the writes (ensure), under rdma-pin-limit, where a chunk may have to be
//     unregistered first, and only what no write in flight targets may be.
// Writing is the session's (its hooks): a piece is handed back once its chunk is registered.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "control_channel.h"
#include "proto/register_ahead.h"
#include "proto/registration_cache.h"

namespace rdma_migrate {

class RemoteRegistrations {
public:
    struct Hooks {
        std::function<Status()> drain_writes;     // before the destination may unpin anything
        std::function<Status()> between_answers;  // after an answer, before the next request (verify-ram's sums)
        std::function<Status(const QueuedPiece&)> write;  // a queued piece whose chunk is registered now
        std::function<Status()> written;          // after a run of those: its short batches go out
    };
    struct Counts {
        uint64_t registered = 0;  // chunks the destination registered at our request
        uint64_t released = 0;    // ... and unregistered (rdma-pin-limit)
    };

    // `remote`: the destination's RAM blocks (filled in once they are exchanged); `blocks`, this
    // side's. `max_entries`: chunks per request; `pin_limit`: bytes registered at once (0: any).
    RemoteRegistrations(ControlChannel& ctl, const std::vector<BlockDesc>& remote, const std::vector<LocalBlock>& blocks,
                        ChunkGeometry geo, size_t max_entries, uint64_t pin_limit, Hooks hooks);

    // The destination's registration of a chunk, if it has one (marked most recently used).
    const RegisterResult* find(const ChunkKey& k) { return regs_.find(k); }
    size_t size() const { return regs_.size(); }
    // Chunks registered and released since the last new_round().
    const Counts& counts() const { return counts_; }
    void new_round() { counts_ = {}; }

    // A group ahead: queues one range's pieces, writing (the hooks) what is registered already
    // and asking for the rest a group at a time.
    Status queue(uint32_t block, const std::vector<Piece>& pieces);
    // Before any other control message, and at the end of a round: everything asked is
    // answered and everything queued is written.
    Status finish();
    // Whether a request waits for its answer: the destination reads nothing else until it has
    // answered, so no other control message may go.
    bool awaiting_answer() const { return !asking_.empty(); }

    // Under rdma-pin-limit: `chunks` of `block` registered now, others released first if the
    // limit needs it.
    Status ensure(uint32_t block, const std::vector<uint64_t>& chunks);

private:
    Status ask(const std::vector<ChunkKey>& chunks, ControlChannel::Sent sent);
    Status take(const std::vector<ChunkKey>& chunks);
    Status step(bool final);
    Status take_arrived();
    Status write_ready();
    Status release(const std::vector<ChunkKey>& victims);
    RegisterAhead::Registered registered() const {
        return [this](const ChunkKey& k) { return regs_.contains(k); };
    }

    ControlChannel& ctl_;
    const std::vector<BlockDesc>& remote_;
    const std::vector<LocalBlock>& blocks_;
    ChunkGeometry geo_;
    size_t max_entries_;
    Hooks hooks_;
    RegistrationCache<RegisterResult> regs_;
    // Without rdma-pin-limit: the queue of pieces and the group the destination is registering
    // now (its answer not read yet).
    RegisterAhead ahead_;
    std::vector<ChunkKey> asking_;
    Counts counts_;
};

}  // namespace rdma_migrate

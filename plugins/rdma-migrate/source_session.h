// SourceSession: the writer. It connects, negotiates, learns the destination's RAM blocks, and
// moves RAM by RDMA WRITE (spec: "Migration of VM's ram"):
//   - RDMA WRITE per chunk piece, posted in batches, every 64th signalled, striped by chunk over
//     rdma-channels queue pairs (lanes, each with its own CQ, all on one PD; source_writes.cc);
//   - dynamic registration asks the destination for each chunk's rkey (Register request/result,
//     many chunks per message) a group ahead of the writes (RegisterAhead), or, under
//     rdma-pin-limit, just before them, releasing least-recently-used ones over the limit
//     (Unregister request/finished; source_register.cc);
//   - zero ranges become COMPRESS; verify-ram's sums follow the writes they vouch for
//     (source_sums.cc); Register finished ends a round.
// The source never registers its memory for remote access.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "connection.h"
#include "postcopy_channel.h"
#include "proto/register_ahead.h"
#include "proto/registration_cache.h"
#include "proto/sums_outbox.h"
#include "proto/write_ledger.h"

namespace rdma_migrate {

class SourceSession final : public Connection {
public:
    // Connect, negotiate capabilities, open the other channels.
    static Result<std::unique_ptr<SourceSession>> connect(const std::string& host, uint16_t port, SessionConfig cfg);
    ~SourceSession() override;

    // Once the destination has accepted the stream's header: the RAM-block exchange (the first
    // round does it if this was not called).
    Status ram_setup() { return blocks_known_ ? Status{} : exchange_blocks(); }
    Status ram_begin_round(uint32_t round);
    Status ram_send(uint32_t block, uint64_t offset, uint64_t length);
    Status ram_send_zero(uint32_t block, uint64_t offset, uint64_t length);
    Status ram_end_round();
    // Bytes given to ram_send not yet known to have arrived: queued for registration, batched,
    // or posted and not yet vouched for by a completion (see WriteLedger).
    uint64_t ram_in_flight() const;
    // `fn(ctx)` is called whenever more of what ram_in_flight() counts has arrived (NULL: never).
    void on_arrival(void (*fn)(void*), void* ctx) {
        arrival_fn_ = fn;
        arrival_ctx_ = ctx;
    }
    // verify-ram: the sums of the range the next ram_send or ram_send_zero hands over; they go
    // to the destination once those pages are known to be there.
    Status ram_sums(uint32_t block, uint64_t offset, std::span<const uint64_t> sums);
    // The postcopy channel, when one was agreed (else null).
    PostcopySource* postcopy() { return postcopy_.get(); }

private:
    // One queue pair's RDMA WRITEs: the writes posted and known complete (and their bytes),
    // the batch being built, and its last write (re-posted, 8 bytes, signalled, to drain the
    // lane).
    struct Lane {
        explicit Lane(Endpoint* e) : ep(e) {}
        Endpoint* ep;
        WriteLedger ledger;
        uint64_t last_signalled = 0;     // the last write queued signalled
        uint64_t signalled_on_wire = 0;  // the last signalled write handed to the HCA
        uint64_t unsignalled_bytes = 0;  // queued since the last signalled write
        ibv_send_wr last_wr{};
        ibv_sge last_sge{};
        std::vector<ibv_send_wr> wrs;
        std::vector<ibv_sge> sges;
        std::deque<std::pair<uint64_t, uint64_t>> tags;  // write index, its range's number in sums_
    };
    // Registration work of the current round, traced when the round ends: it must follow the
    // chunks the round touches, never the size of RAM (pin-all registers once).
    struct RoundWork {
        uint32_t round = 0;
        uint64_t pieces = 0;             // chunk-sized (or smaller) writes posted
        uint64_t remote_registered = 0;  // chunks the destination registered at our request
        uint64_t remote_released = 0;    // ... and unregistered (rdma-pin-limit)
        uint64_t local_registered = 0;   // our own local-read registrations
        uint64_t local_released = 0;
    };

    SourceSession(std::unique_ptr<Endpoint> ep, std::unique_ptr<ControlChannel> ctl, SessionConfig cfg, ChunkGeometry g,
                  uint32_t agreed);
    Status blocks_requested() override;
    Status authenticate();
    Status connect_channels(const std::string& host, uint16_t port, PrivateData first, uint32_t lanes, bool postcopy_channel);
    Status exchange_blocks();

    // source_writes.cc: the lanes
    Status lane_progress(Lane& lane, const std::function<bool()>& done);
    // The completion handler of a lane other than lane 0, whose CQ the control channel reads.
    std::function<Status(const ibv_wc&)> on_lane_completion(Lane& lane);
    Status queue_write(Lane& lane, ibv_send_wr wr, ibv_sge sge, uint64_t sums);
    Status write_piece(uint32_t block, const Piece& p);
    Result<uint32_t> local_lkey(uint32_t block, uint64_t chunk);
    Status write_pieces(uint32_t block, const std::vector<Piece>& pieces);
    Status post_writes(Lane& lane);
    Status post_short_batches();
    Status sent_pieces();
    Status drain_writes();
    Status reap_writes();  // takes the completions that have come, without waiting
    void write_completed(Lane& lane, uint64_t index);  // and tells on_arrival's callback
    Status wait_lane(Lane& lane, const std::function<bool()>& done);
    uint64_t ram_chunks() const;  // chunks in all RAM blocks
    Status flush_compress();

    // source_register.cc: dynamic registration
    Status ensure_remote(uint32_t block, const std::vector<uint64_t>& chunks);
    Status ask_registration(const std::vector<ChunkKey>& chunks, ControlChannel::Sent sent);
    Status take_registration(const std::vector<ChunkKey>& chunks);
    Status register_step(bool final);
    Status take_arrived_registration();
    // Whether the destination has registered a chunk for us (RegisterAhead asks this).
    RegisterAhead::Registered registered_remotely() const {
        return [this](const ChunkKey& k) { return remote_regs_.contains(k); };
    }
    Status post_ready();
    Status finish_ahead();

    // source_sums.cc: verify-ram (the bookkeeping is sums_'s)
    void writes_landed(Lane& lane);
    Status flush_sums(bool all);
    bool sums_due() const;  // enough sums ready for a message, and no request awaits its answer
    Status finish_sums();

    std::vector<BlockDesc> remote_;  // the destination's blocks
    // What the destination has registered for us, and our own (local-read) MRs.
    RegistrationCache<RegisterResult> remote_regs_;
    RegistrationCache<MemoryRegion> local_regs_;
    std::vector<Compress> compress_;
    // Dynamic registration without rdma-pin-limit: the queue of pieces and the group the
    // destination is registering now (its answer not read yet).
    RegisterAhead ahead_;
    std::vector<ChunkKey> asking_;
    RoundWork work_;
    std::vector<Lane> lanes_;  // lane i writes on channel i; chunk c goes to lane c % N
    uint64_t accepted_ = 0;    // bytes given to ram_send
    void (*arrival_fn_)(void*) = nullptr;
    void* arrival_ctx_ = nullptr;
    SumsOutbox sums_;  // verify-ram's sums: given, waiting for their writes or COMPRESS, ready
    std::unique_ptr<PostcopySource> postcopy_;  // its MRs go before the PD (the destructor hangs up first)
};

}  // namespace rdma_migrate

// SourceSession: the writer. It connects, negotiates, learns the destination's RAM blocks, and
// moves RAM by RDMA WRITE (spec: "Migration of VM's ram"):
//   - RDMA WRITE per chunk piece, posted in batches, every 64th signalled, striped by chunk over
//     rdma-channels queue pairs (LaneWriter, source_lanes.h);
//   - dynamic registration asks the destination for each chunk's rkey (Register request/result,
//     many chunks per message) a group ahead of the writes (RegisterAhead), or, under
//     rdma-pin-limit, just before them, releasing least-recently-used ones over the limit
//     (Unregister request/finished; RemoteRegistrations, remote_registrations.h);
//   - its own RAM registered for local reads chunk by chunk, or whole under rdma-pin-all
//     (source_writes.cc);
//   - zero ranges become COMPRESS; verify-ram's sums follow the writes they vouch for
//     (source_sums.cc); Register finished ends a round.
// The source never registers its memory for remote access.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "connection.h"
#include "postcopy_channel.h"
#include "proto/registration_cache.h"
#include "proto/sums_outbox.h"
#include "remote_registrations.h"
#include "source_lanes.h"

namespace rdma_migrate {

class SourceSession {
public:
    // Connect, negotiate capabilities, open the other channels.
    static Result<std::unique_ptr<SourceSession>> connect(const std::string& host, uint16_t port, SessionConfig cfg);
    ~SourceSession();
    SourceSession(const SourceSession&) = delete;
    SourceSession& operator=(const SourceSession&) = delete;

    // The connection (its byte stream, its summary, cut and abort).
    Connection& link() { return link_; }

    // Once the destination has accepted the stream's header: the RAM-block exchange (the first
    // round does it if this was not called).
    Status ram_setup() { return blocks_known_ ? Status{} : exchange_blocks(); }
    Status ram_begin_round(uint32_t round);
    Status ram_send(uint32_t block, uint64_t offset, uint64_t length);
    Status ram_send_zero(uint32_t block, uint64_t offset, uint64_t length);
    Status ram_end_round();
    // Bytes given to ram_send not yet known to have arrived: queued for registration, batched,
    // or posted and not yet vouched for by a completion (see WriteLedger).
    uint64_t ram_in_flight() const { return lanes_.in_flight(); }
    // `fn(ctx)` is called whenever more of what ram_in_flight() counts has arrived (NULL: never).
    void on_arrival(void (*fn)(void*), void* ctx) { lanes_.on_arrival(fn, ctx); }
    // `fn` hears of each write of guest RAM once it is known complete (plugin ABI ram_on_landed).
    void on_landed(LaneWriter::LandedFn fn) { lanes_.on_landed(std::move(fn)); }
    // verify-ram: the sums of the range the next ram_send or ram_send_zero hands over; they go
    // to the destination once those pages are known to be there.
    Status ram_sums(uint32_t block, uint64_t offset, std::span<const uint64_t> sums);
    // The postcopy channel, when one was agreed (else null).
    PostcopySource* postcopy() { return postcopy_.get(); }

private:
    // Registration work of the current round, traced when the round ends: it must follow the
    // chunks the round touches, never the size of RAM (pin-all registers once). The remote
    // registrations count theirs.
    struct RoundWork {
        uint32_t round = 0;
        uint64_t pieces = 0;            // chunk-sized (or smaller) writes posted
        uint64_t local_registered = 0;  // our own local-read registrations
        uint64_t local_released = 0;
    };

    SourceSession(std::unique_ptr<Endpoint> ep, std::unique_ptr<ControlChannel> ctl, SessionConfig cfg, ChunkGeometry g,
                  uint32_t agreed);
    Status authenticate();
    Status connect_channels(const std::string& host, uint16_t port, PrivateData first, uint32_t lanes, bool postcopy_channel);
    Status exchange_blocks();
    void trace_round() const;

    // source_writes.cc: a range's pieces, registered and written
    Status write_piece(uint32_t block, const Piece& p);
    Result<uint32_t> local_lkey(uint32_t block, uint64_t chunk);
    Status write_pieces(uint32_t block, const std::vector<Piece>& pieces);
    Status sent_pieces();
    uint64_t ram_chunks() const;  // chunks in all RAM blocks
    Status flush_compress();

    // source_sums.cc: verify-ram (the bookkeeping is sums_'s)
    Status flush_sums(bool all);
    bool sums_due() const;  // enough sums ready for a message, and no request awaits its answer
    Status finish_sums();

    Connection link_;  // first: it goes last, after every MR made on its PD
    ControlChannel& ctl_;
    const SessionConfig& cfg_;  // as negotiated
    const ChunkGeometry geo_;
    bool blocks_known_ = false;      // RAM BLOCKS RESULT taken
    std::vector<BlockDesc> remote_;  // the destination's blocks
    LaneWriter lanes_;               // lane i writes on channel i; chunk c goes to lane c % N
    RemoteRegistrations remote_regs_;  // what the destination has registered for us
    RegistrationCache<MemoryRegion> local_regs_;  // our own (local-read) MRs
    std::vector<Compress> compress_;
    RoundWork work_;
    SumsOutbox sums_;  // verify-ram's sums: given, waiting for their writes or COMPRESS, ready
    std::unique_ptr<PostcopySource> postcopy_;  // its MRs go before the PD (the destructor hangs up first)
};

}  // namespace rdma_migrate

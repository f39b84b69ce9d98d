// Session: one RDMA migration connection, either side.
//   Negotiation: the base protocol as QEMU speaks it, plus each of our extensions (wire.h) that
//     both sides granted in the private data; a base-protocol peer gets 1 MiB chunks, one
//     channel, one entry per request and an ERROR without text.
//   RAM-block exchange (spec: "Migration of VM's ram"): once the destination has accepted the
//     stream's header (ram_setup; QEMU: after its stream's first bytes, in its setup), the source
//     asks and the destination, reading the stream or serving a round, describes its blocks
//     (with rkeys when everything is pinned up front); mismatches fail.
//   Byte stream (spec: "QEMUFileRDMA Interface"): QEMU File messages; the receiver keeps the
//     unread rest of a message for the next read.
//   Source RAM channel: RDMA WRITE per chunk piece, posted in batches, every 64th signalled,
//     striped by chunk over rdma-channels queue pairs (each with its own CQ, all on one PD);
//     dynamic registration asks the destination for each chunk's rkey (Register request/result,
//     many chunks per message) a group ahead of the writes (RegisterAhead), or, under
//     rdma-pin-limit, just before them, releasing least-recently-used ones over the limit
//     (Unregister request/finished); zero ranges become COMPRESS; Register finished ends a round.
//   Destination: serves a round — registers chunks for remote write (only inside its RAM
//     blocks, chunk-aligned), zeroes COMPRESS ranges, unregisters on request — until Register
//     finished. Every entry is bounds-checked first; anything invalid aborts with ERROR.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "chunks.h"
#include "connection.h"
#include "control_channel.h"
#include "register_ahead.h"
#include "registration_cache.h"
#include "write_ledger.h"

namespace rdma_migrate {

struct SessionConfig {
    std::vector<LocalBlock> blocks;
    uint64_t chunk_size = ChunkGeometry::kDefault;
    uint64_t pin_limit = 0;  // bytes registered at once per side, 0 = unlimited
    bool pin_all = false;    // asked for (source) / granted (after negotiation)
    uint32_t channels = 1;   // queue pairs (rdma-channels): asked for (source) / granted
    Timeouts timeouts;
    int cancel_fd = -1;
    uint32_t announce_version = kProtocolVersion;  // what the source puts in its private data
    bool base_protocol = false;  // offer (source) / grant (destination) no extension: for tests
};

class Session {
public:
    // Source side: connect, negotiate capabilities, exchange blocks.
    static Result<std::unique_ptr<Session>> connect(const std::string& host, uint16_t port, SessionConfig cfg);
    // Destination side: accept one source on `listener`, answer with the capabilities this side
    // supports (rdma-pin-all unless `pin_all_refusal` says why not), describe blocks.
    static Result<std::unique_ptr<Session>> accept(Endpoint& listener, SessionConfig cfg,
                                                   const std::string& pin_all_refusal);
    ~Session();

    Status write(const void* data, size_t len);
    Status flush();
    Status read(void* out, size_t len);

    // Source, once the destination has accepted the stream's header: the RAM-block exchange
    // (the first round does it if this was not called).
    Status ram_setup() { return blocks_known_ ? Status{} : exchange_blocks_source(); }
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
    Status serve_round(uint32_t round);  // tells the source why with ERROR if it fails

    // verify-ram sums (kCapSums; session_sums.cc). Whether the peer agreed to carry them:
    bool carries_sums() const { return (agreed_ & kCapSums) != 0; }
    // Source: the sums of the range the next ram_send or ram_send_zero hands over; they go to
    // the destination once those pages are known to be there.
    Status ram_sums(uint32_t block, uint64_t offset, std::span<const uint64_t> sums);
    // Destination: where the source's sums go, during serve_round (empty: nowhere).
    using SumsFn = std::function<Status(uint32_t block, uint64_t offset, std::span<const uint64_t> sums)>;
    void on_sums(SumsFn fn) { sums_fn_ = std::move(fn); }

    // Tells the peer why we give up (best effort).
    void abort(const std::string& reason) { ctl_->send_error(reason); }
    // The peer and what was negotiated: "rdma 10.0.0.1:4444: dynamic registration, 1 MiB
    // chunks, 1 channel", and why rdma-pin-all was not granted if it was asked for.
    const std::string& describe() const { return summary_; }
    bool pin_all() const { return cfg_.pin_all; }

private:
    void summarize(const std::string& note);  // sets describe() once negotiated

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
        std::deque<std::pair<uint64_t, uint64_t>> tags;  // write index, sums sequence (session_sums.cc)
    };
    // A data range's sums and how many of its writes have not landed yet.
    struct PendingSums {
        size_t pieces;
        SumsEntry entry;
    };

    // Registration work of the source's current round, traced when the round ends: it must
    // follow the chunks the round touches, never the size of RAM (pin-all registers once).
    struct RoundWork {
        uint32_t round = 0;
        uint64_t pieces = 0;             // chunk-sized (or smaller) writes posted
        uint64_t remote_registered = 0;  // chunks the destination registered at our request
        uint64_t remote_released = 0;    // ... and unregistered (rdma-pin-limit)
        uint64_t local_registered = 0;   // our own local-read registrations
        uint64_t local_released = 0;
    };

    Session(std::unique_ptr<Endpoint> ep, std::unique_ptr<ControlChannel> ctl, SessionConfig cfg, ChunkGeometry g,
            uint32_t agreed);
    Status connect_channels(const std::string& host, uint16_t port, PrivateData first);
    Status accept_channels();
    Status lane_progress(Lane& lane, const std::function<bool()>& done);
    // The completion handler of a lane other than lane 0, whose CQ the control channel reads.
    std::function<Status(const ibv_wc&)> on_lane_completion(Lane& lane);
    Status queue_write(Lane& lane, ibv_send_wr wr, ibv_sge sge, uint64_t sums);
    Status exchange_blocks_source();
    Status pin_blocks(Use use);
    Status ensure_remote(uint32_t block, const std::vector<uint64_t>& chunks);
    Status ask_registration(const std::vector<ChunkKey>& chunks, ControlChannel::Sent sent);
    Status take_registration(const std::vector<ChunkKey>& chunks);
    Status register_step(bool final);
    // Whether the destination has registered a chunk for us (RegisterAhead asks this).
    RegisterAhead::Registered registered_remotely() const {
        return [this](const ChunkKey& k) { return remote_regs_.contains(k); };
    }
    Status post_ready();
    Status finish_ahead();
    Status write_piece(uint32_t block, const Piece& p);
    Result<uint32_t> local_lkey(uint32_t block, uint64_t chunk);
    Status write_pieces(uint32_t block, const std::vector<Piece>& pieces);
    Status post_writes(Lane& lane);
    Status post_short_batches();
    Status sent_pieces();
    Status drain_writes();
    Status reap_writes();  // takes the completions that have come, without waiting
    void write_completed(Lane& lane, uint64_t index);  // and tells on_arrival's callback
    uint64_t ram_chunks() const;  // chunks in all RAM blocks
    Status flush_compress();
    Status handle_blocks_request();
    Status handle_register(const Message& m);
    Status handle_unregister(const Message& m);
    Status handle_compress(const Message& m);
    Status serve_messages();  // serve_round's loop
    Result<std::optional<SumsEntry>> take_sums(uint32_t block, uint64_t offset, uint64_t length);
    uint64_t await_writes(SumsEntry e, size_t pieces);
    void sums_ready(SumsEntry e);
    void writes_landed(Lane& lane);
    Status flush_sums(bool all);
    bool sums_due() const;  // enough sums ready for a message, and no request awaits its answer
    Status wait_lane(Lane& lane, const std::function<bool()>& done);
    Status finish_sums();
    Status handle_sums(const Message& m);

    // How long a destination waits for the source to hang up at the end (~Session).
    static constexpr int kHangUpWaitMs = 10000;
    // The destination's first channel holds the listening id it was accepted on; a source's never has one.
    bool destination() const { return static_cast<bool>(ep_->listen_id); }

    std::unique_ptr<Endpoint> ep_;          // first: destroyed last, after every MR below
    std::vector<std::unique_ptr<Endpoint>> extra_;  // channels 1..N-1 (on ep_'s PD)
    std::unique_ptr<ControlChannel> ctl_;
    SessionConfig cfg_;
    std::string summary_;  // describe()
    ChunkGeometry geo_;
    uint32_t agreed_;      // the flags both sides granted (wire.h: kCap*)
    size_t max_entries_;   // per REGISTER/UNREGISTER/COMPRESS message: 4096 with kCapBatch, else 1
    bool blocks_known_ = false;  // source: RAM BLOCKS RESULT taken; destination: sent
    std::vector<BlockDesc> remote_;
    // Source: what the destination has registered for us, and our own (local-read) MRs.
    RegistrationCache<RegisterResult> remote_regs_;
    RegistrationCache<MemoryRegion> local_regs_;
    // Destination: chunks registered for remote write; whole blocks with pin-all.
    RegistrationCache<MemoryRegion> served_regs_;
    std::vector<MemoryRegion> pinned_blocks_;  // pin-all: whole blocks (remote write on the destination,
                                               // local only on the source)
    std::vector<Compress> compress_;
    // Source, dynamic registration without rdma-pin-limit: the queue of pieces and the group
    // the destination is registering now (its answer not read yet).
    RegisterAhead ahead_;
    std::vector<ChunkKey> asking_;
    RoundWork work_;
    std::vector<Lane> lanes_;  // lane i writes on channel i; chunk c goes to lane c % N
    uint64_t accepted_ = 0;    // bytes given to ram_send
    void (*arrival_fn_)(void*) = nullptr;
    void* arrival_ctx_ = nullptr;
    std::vector<uint8_t> out_, in_;
    size_t in_pos_ = 0;
    // verify-ram sums: source — given for the next range, waiting for writes, waiting for a
    // COMPRESS to go, ready to send; destination — where they go.
    std::optional<SumsEntry> next_sums_;
    std::map<uint64_t, PendingSums> pending_sums_;
    std::vector<SumsEntry> zero_sums_, ready_sums_;
    size_t ready_sum_count_ = 0;
    uint64_t sums_seq_ = 0;
    SumsFn sums_fn_;
};

}  // namespace rdma_migrate

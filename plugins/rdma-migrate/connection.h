// Connection: what both sides of one RDMA migration share, once negotiated. The source's
// SourceSession (source_session.h) and the destination's DestinationSession
// (destination_session.h) each hold one, beside their half of the RAM protocol.
//   Negotiation: the base protocol as QEMU speaks it, plus each of our extensions (wire.h) that
//     both sides granted in the private data; a base-protocol peer gets 1 MiB chunks, one
//     channel, one entry per request and an ERROR without text.
//   Channels (channel_set.h): channel 0 carries the control channel (control_channel.h); with
//     rdma-channels, channels 1..N-1 share its PD, so one rkey serves all of them.
//   Byte stream (spec: "QEMUFileRDMA Interface"): QEMU File messages (file_messages.h); a RAM
//     BLOCKS REQUEST that arrives while the destination reads the stream goes to the side
//     (blocks_requested).
//   rdma-pin-all: each side registers its RAM blocks whole, during setup (whole_blocks.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "channel_set.h"
#include "control_channel.h"
#include "endpoint.h"
#include "file_messages.h"
#include "whole_blocks.h"
#include "proto/chunks.h"
#include "proto/postcopy_auth.h"

namespace rdma_migrate {

struct SessionConfig {
    std::vector<LocalBlock> blocks;
    uint64_t chunk_size = ChunkGeometry::kDefault;  // x-rdma-chunk-size
    bool chunk_size_set = false;  // ... set by the user: a destination then takes no other size
    uint64_t pin_limit = 0;  // bytes registered at once per side, 0 = unlimited
    bool pin_all = false;    // asked for (source) / granted (after negotiation)
    uint32_t channels = 1;   // queue pairs (rdma-channels): asked for (source) / granted
    Timeouts timeouts;       // x-connect-timeout, x-io-timeout (vmm passes both)
    int cancel_fd = -1;
    uint32_t announce_version = kProtocolVersion;  // what the source puts in its private data
    bool base_protocol = false;  // offer (source) / grant (destination) no extension: for tests
    bool postcopy = false;  // postcopy-ram on: offer (source) / grant (destination) a postcopy channel
    bool postcopy_read = false;  // x-rdma-postcopy-read: offer / grant kCapPostcopyRead (with postcopy)
    bool postcopy_read_push = false;  // x-rdma-postcopy-read-push: offer kCapPostcopyReadPush (source)
    uint32_t postcopy_read_wait_us = 1000;  // x-rdma-postcopy-read-wait: the fault thread's poll for its READ (destination)
    uint64_t pull_rate = 0;  // source: max-postcopy-bandwidth at connect, bytes/s (0: unlimited), for the pulls
    bool verify = false;         // verify-ram on at this side: no READ, whose pages come without sums
    // tls-creds set: offer (source) / require (destination) kCapTls, authenticate with these (the
    // role is the side's: the source is the TLS client).
    std::optional<vmm::stream::TlsSetup> tls;
};

// One side's connection, held by its session (composition: the session calls only what is
// public here). It owns the channels' endpoints, the control channel and the byte stream, and
// under rdma-pin-all the whole-block registrations; the session holding it declares it first,
// so it goes last, after every MR the session made on its PD.
class Connection {
public:
    // `blocks_requested`: what a RAM BLOCKS REQUEST read from the stream does (the destination
    // answers it, a source refuses it).
    Connection(std::unique_ptr<Endpoint> ep, std::unique_ptr<ControlChannel> ctl, SessionConfig cfg, ChunkGeometry g,
               uint32_t agreed, std::function<Status()> blocks_requested);
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // The migration's byte stream (file_messages.h).
    Status write(const void* data, size_t len) { return stream_.write(data, len); }
    Status flush() { return stream_.flush(); }
    Status read(void* out, size_t len) { return stream_.read(out, len); }

    // Breaks every channel's connection, and stops all DMA on every channel (channel_set.h):
    // each session's destructor hangs up before its own members unwind.
    void cut() { channels_.cut(); }
    // Whether the connection failed because a channel's link did, neither side having ended the
    // migration with ERROR (a resumable precopy then waits for a new connection).
    bool link_lost() const { return channels_.link_lost() && !ctl_->sent_error() && !ctl_->peer_ended(); }
    void hang_up() { channels_.hang_up(); }
    // Tells the peer why we give up (best effort).
    void abort(const std::string& reason) { ctl_->send_error(reason); }
    // The peer and what was negotiated: "rdma 10.0.0.1:4444: dynamic registration, 1 MiB
    // chunks, 1 channel", and why rdma-pin-all was not granted if it was asked for.
    const std::string& describe() const { return summary_; }
    void summarize(const std::string& note);  // sets describe() once negotiated
    bool pin_all() const { return cfg_.pin_all; }
    // verify-ram sums (kCapSums): whether the peer agreed to carry them.
    bool carries_sums() const { return (agreed_ & kCapSums) != 0; }
    // kCapTls agreed: the peer authenticated, every control message inside TLS, the sums keyed.
    bool authenticated() const { return (agreed_ & kCapTls) != 0; }
    // The key of the RAM sums (VMM_RAM_SUMS_KEYED), exported from the TLS session.
    Result<std::vector<uint8_t>> sums_key(size_t size) const;
    // The postcopy channel's keys (proto/postcopy_auth.h) when authenticated, else none.
    Result<std::optional<PcKeys>> postcopy_keys() const;
    // Where setup's time went so far, step by step (channel 0's making first); the setup_parts
    // op reads it from another thread while the steps after connect or accept are added.
    std::vector<TimedStep> setup_steps() const;
    void add_steps(const std::vector<TimedStep>& steps, bool first = false);

    // What was negotiated, for the session.
    const SessionConfig& config() const { return cfg_; }
    ChunkGeometry geometry() const { return geo_; }
    bool agreed(uint32_t caps) const { return (agreed_ & caps) == caps; }
    // Entries per REGISTER/UNREGISTER/COMPRESS message: 4096 with kCapBatch, else 1.
    size_t max_entries() const { return max_entries_; }
    // The control channel, the channels (channel 0 and those added after it), and under
    // rdma-pin-all the whole-block registrations (pin them for `use` with pin_blocks).
    ControlChannel& control() const { return *ctl_; }
    ChannelSet& channels() { return channels_; }
    const ChannelSet& channels() const { return channels_; }
    Endpoint& first() const { return channels_.first(); }
    Status pin_blocks(Use use) { return pinned_.pin(first().memory(), cfg_.blocks, use, channels_.side()); }
    WholeBlocks& pinned() { return pinned_; }
    const WholeBlocks& pinned() const { return pinned_; }

private:
    ChannelSet channels_;  // first: destroyed last, after every MR
    std::unique_ptr<ControlChannel> ctl_;
    SessionConfig cfg_;
    ChunkGeometry geo_;
    uint32_t agreed_;  // the flags both sides granted (wire.h: kCap*)
    size_t max_entries_;
    WholeBlocks pinned_;  // rdma-pin-all: whole blocks
    mutable std::mutex steps_mutex_;
    std::vector<TimedStep> steps_;  // setup_steps()
    std::string summary_;  // describe()
    FileMessages stream_;  // on *ctl_
};

}  // namespace rdma_migrate

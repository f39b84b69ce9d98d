// DestinationSession: the server. It accepts one source, answers with the capabilities this
// side supports, describes its RAM blocks when asked (with rkeys when everything is pinned up
// front), and serves each round: registers chunks for remote write (only inside its RAM
// blocks, chunk-aligned), zeroes COMPRESS ranges, unregisters on request, hands verify-ram's
// sums to vmm, until Register finished. Every entry is bounds-checked first; anything invalid
// ends the round and is told to the source with ERROR.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "connection.h"
#include "postcopy_channel.h"
#include "proto/registration_cache.h"

namespace rdma_migrate {

class DestinationSession {
public:
    // Accept one source on `listener`, answer with the capabilities this side supports
    // (rdma-pin-all unless `pin_all_refusal` says why not), accept its other channels. With
    // tls-creds, a peer that does not offer kCapTls, or fails the handshake, or says nothing
    // within x-connect-timeout, is refused and logged, and the wait goes on for the real source.
    // `wait_ms`: at most this long (-1: until a source comes or vmm cancels). `give_back`: the
    // listener (when it is held so), which gets its listening id back when the session ends, to
    // wait for the next source (a precopy's resumption after a broken link).
    static Result<std::unique_ptr<DestinationSession>> accept(Endpoint& listener, SessionConfig cfg,
                                                              const std::string& pin_all_refusal, int wait_ms = -1,
                                                              const std::weak_ptr<Endpoint>& give_back = {});
    ~DestinationSession();
    DestinationSession(const DestinationSession&) = delete;
    DestinationSession& operator=(const DestinationSession&) = delete;

    // The connection (its byte stream, its summary, cut and abort).
    Connection& link() { return link_; }

    Status serve_round(uint32_t round);  // tells the source why with ERROR if it fails
    // verify-ram: where the source's sums go, during serve_round (empty: nowhere).
    using SumsFn = std::function<Status(uint32_t block, uint64_t offset, std::span<const uint64_t> sums)>;
    void on_sums(SumsFn fn) { sums_fn_ = std::move(fn); }
    // The postcopy channel, when one was agreed (else null).
    PostcopyDestination* postcopy() { return postcopy_.get(); }
    // The switch to postcopy: the precopy rounds' registrations of guest RAM go (the pages they
    // pin are about to be dropped, and nothing writes into guest RAM from now on), then the
    // landing slots are registered and the source told where they are.
    Status begin_postcopy();

private:
    DestinationSession(std::unique_ptr<Endpoint> ep, std::unique_ptr<ControlChannel> ctl, SessionConfig cfg,
                       ChunkGeometry g, uint32_t agreed);
    static Status check_chunk_size(const PrivateData& theirs, const SessionConfig& cfg);
    static Status admissible(const PrivateData& theirs, const SessionConfig& cfg);
    // One attempt; `peer_refused` says that the peer was turned away and the listener is whole.
    static Result<std::unique_ptr<DestinationSession>> accept_one(Endpoint& listener, SessionConfig cfg,
                                                                  const std::string& pin_all_refusal, bool& peer_refused,
                                                                  int wait_ms, const std::weak_ptr<Endpoint>& give_back);
    Status blocks_requested();
    Status accept_channels();
    Status serve_messages();  // serve_round's loop
    Status handle_register(const Message& m);
    Status handle_unregister(const Message& m);
    Status handle_compress(const Message& m);
    Status handle_sums(const Message& m);

    // How long the destination waits for the source to hang up at the end.
    static constexpr int kHangUpWaitMs = 10000;

    Connection link_;  // first: it goes last, after every MR made on its PD
    ControlChannel& ctl_;
    const SessionConfig& cfg_;  // as negotiated
    const ChunkGeometry geo_;
    bool blocks_known_ = false;  // RAM BLOCKS RESULT sent
    // Chunks registered for remote write (pin-all: the connection's pinned blocks instead).
    RegistrationCache<MemoryRegion> served_regs_;
    SumsFn sums_fn_;
    std::unique_ptr<PostcopyDestination> postcopy_;  // its MRs go before the PD (the destructor hangs up first)
    std::weak_ptr<Endpoint> listener_;               // accept()'s give_back
};

}  // namespace rdma_migrate

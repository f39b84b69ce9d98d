// ControlChannel (spec: "qemu_rdma_exchange_send/recv"): SEND messages with a {length, type,
// repeat} header over the connection's QP. Two receive buffers are posted before connecting;
// every consumed receive is re-posted at once. The READY handshake: a side that wants to
// receive says READY first; a side that wants to send waits for READY, then sends.
//
// Completions may arrive in any order: wr_id says what each one is (receive buffer index,
// send, or RDMA WRITE), and anything that is not a control completion goes to `on_other`
// (the RDMA-WRITE pipeline counts its completions there).
#pragma once

#include <array>
#include <deque>
#include <functional>
#include <initializer_list>
#include <vector>

#include "control_buffers.h"
#include "endpoint.h"
#include "proto/wire.h"
#include "vmm/stream/tls_stream.h"

namespace rdma_migrate {

class ControlPipe;

enum class WrKind : uint64_t { recv = 1, send = 2, write = 3 };
inline uint64_t make_wr_id(WrKind k, uint64_t n) { return (static_cast<uint64_t>(k) << 56) | (n & ((1ull << 56) - 1)); }
inline WrKind wr_kind(uint64_t id) { return static_cast<WrKind>(id >> 56); }
inline uint64_t wr_index(uint64_t id) { return id & ((1ull << 56) - 1); }

class ControlChannel {
public:
    explicit ControlChannel(Endpoint& e) : e_(e) {}
    // Its registrations go, then its buffers go back to be the process's spare (control_buffers.h).
    ~ControlChannel();
    ControlChannel(const ControlChannel&) = delete;
    ControlChannel& operator=(const ControlChannel&) = delete;
    // For connect_endpoint/accept_endpoint: makes `ctl` on the new connection, before it
    // connects, and posts its receives.
    static BeforeConnect make_on(std::unique_ptr<ControlChannel>& ctl);

    // Takes a set of buffers (the spare, made ahead), registers them (local access only) and
    // posts both receives.
    Status init();
    // The spec's exchange_send: wait for READY, send `msg`. With Sent::later it returns once
    // the SEND is posted (RDMA WRITEs posted next then queue behind it, not before it); the
    // next send waits for its completion.
    enum class Sent { wait, later };
    Status exchange_send(const std::vector<uint8_t>& msg, Sent sent = Sent::wait);
    // The answer to a request sent with exchange_send: the next message, of type `answer`.
    Result<Message> answer(Command answer);
    // The spec's exchange_recv: say READY (not waiting for its completion: the message it
    // invites is proof enough), receive one message of one of `expected` types.
    // An ERROR from the peer becomes an error carrying the peer's reason.
    Result<Message> exchange_recv(std::initializer_list<Command> expected);
    // exchange_send, then receive the peer's answer (READY-less: the peer answers at once).
    Result<Message> request(const std::vector<uint8_t>& msg, Command answer);
    // Answers a request just received (the requester waits for it; no READY first).
    Status reply(const std::vector<uint8_t>& msg) { return send_now(msg); }
    // Sends ERROR without waiting for READY (best effort, when aborting): with its reason when
    // the peer granted kCapErrorText. It waits for the SEND at most kErrorNoticeMs: a peer that
    // stopped reading (its receives all used) must not hold the failure a second x-io-timeout.
    void send_error(const std::string& reason);
    void error_text(bool on) { error_text_ = on; }
    static constexpr int kErrorNoticeMs = 1000;
    // Whether this side has ended the migration with ERROR (or tried to).
    bool sent_error() const { return sent_error_; }
    // The peer's ERROR, said as an error, and remembered: the peer ended the migration (its link
    // did not break).
    Error peer_aborted(const Message& m);
    bool peer_ended() const { return peer_aborted_; }

    // Completions that are not the control channel's (RDMA WRITEs) go here.
    std::function<Status(const ibv_wc&)> on_other;
    // Drives the CQ until `done()`.
    Status progress(const std::function<bool()>& done, int timeout_ms = -1);
    // Handles what the CQ holds now, without waiting.
    Status reap();
    // Whether a message has arrived that nothing has taken yet (after reap or progress).
    bool has_message() const { return !arrived_.empty(); }

    // kCapTls: the TLS handshake (control_tls.h), then every message either side sends on this
    // channel travels inside the session. On failure the peer has been told (a TLS alert) and
    // the channel is good for nothing more.
    Status secure(const vmm::stream::TlsSetup& setup);
    bool secured() const { return tls_ != nullptr; }
    // Keying material both sides derive from the session alone (RFC 8446 §7.5).
    Result<std::vector<uint8_t>> export_key(const std::string& label, size_t size) const;

    // Below TLS (ControlPipe): one message as it goes on the wire, and the next that arrives.
    Status send_raw(const std::vector<uint8_t>& msg, Sent sent = Sent::wait, int timeout_ms = -1);
    Result<Message> next_raw();
    // Waits at most timeout_ms (-1: x-io-timeout) for a message to arrive.
    Status await_message(int timeout_ms);

private:
    Status post_recv(size_t i);
    // What the protocol sends and receives: inside the TLS session once there is one.
    Status send_now(const std::vector<uint8_t>& msg, Sent sent = Sent::wait, int timeout_ms = -1);
    Result<Message> next_message();
    Status on_completion(const ibv_wc& wc);

    Endpoint& e_;
    std::unique_ptr<ControlBuffers> buffers_;  // before the MRs on them: they go first
    std::array<std::span<uint8_t>, ControlBuffers::kReceives> recv_buf_;
    std::span<uint8_t> send_buf_;
    std::array<MemoryRegion, ControlBuffers::kReceives> recv_mr_;
    MemoryRegion send_mr_;
    std::deque<std::pair<size_t, uint32_t>> arrived_;  // buffer index, byte length
    bool send_done_ = true;
    bool sent_error_ = false;
    bool peer_aborted_ = false;
    bool error_text_ = true;
    uint64_t sends_ = 0;
    ControlPipe* pipe_ = nullptr;  // tls_'s stream below it
    std::unique_ptr<vmm::stream::ByteStream> tls_;
};

}  // namespace rdma_migrate

// TLS over the control channel (kCapTls, docs/rdma-protocol.md "Authenticated migrations"). The
// TLS session is vmm's own (vmm/stream/tls_stream.h: TLS 1.3, both sides
// authenticated, the writer's key renewed long before AES-GCM's limit); what it runs over is
// this: a ByteStream whose bytes travel in TLS messages on the control channel, SENDs like every
// other control message. Nothing else changes in the protocol above: each control message, the
// READYs included, is written into the session whole and leaves as one or more TLS messages.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "control_channel.h"
#include "vmm/stream/byte_stream.h"

namespace rdma_migrate {

class ControlPipe final : public vmm::stream::ByteStream {
public:
    explicit ControlPipe(ControlChannel& ctl) : ctl_(ctl) {}

    using ByteStream::write;
    // Gathers: nothing leaves before flush (during the handshake: GnuTLS flushes each flight)
    // or send_pending (after it: the channel sends each message's records together).
    Status write(std::span<const std::span<const uint8_t>> buffers) override;
    Status flush() override { return handshaking_ ? send_pending(ControlChannel::Sent::wait) : Status{}; }
    // The TLS messages' bytes, in order; anything else from the peer ends the session (an ERROR
    // with the peer's reason).
    Status read_exact(std::span<uint8_t> out) override;
    Status await_readable(std::chrono::milliseconds within) override;

    // What was written, as TLS messages of at most one control buffer each.
    Status send_pending(ControlChannel::Sent sent, int timeout_ms = -1);
    void handshake_done() { handshaking_ = false; }

private:
    ControlChannel& ctl_;
    std::vector<uint8_t> out_;
    std::vector<uint8_t> in_;
    size_t in_pos_ = 0;
    bool handshaking_ = true;
};

}  // namespace rdma_migrate

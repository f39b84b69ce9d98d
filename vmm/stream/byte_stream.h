// ByteStream: the byte-stream half of a transport (the other half is the RAM channel), and the
// one type every path of a migration is written against: the main stream, multifd's lanes, the
// return path, postcopy-preempt's connection, a recovery's. A socket is one (socket_stream.h);
// a TLS session or a file can stand where it stands. Blocking; every call either completes or
// fails with a reason (peer closed, silence timeout, cancelled, I/O error). What a stream may not
// be able to do (splice guest RAM, put bytes back, be cut from another thread) it is asked, not
// assumed to do from its type.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vmm/common/result.h"

namespace vmm::stream {

class KernelTlsSender;  // kernel_tls.h

class ByteStream {
public:
    virtual ~ByteStream() = default;
    // Writes every byte of every buffer, in order (transports may gather them into one send).
    virtual Status write(std::span<const std::span<const uint8_t>> buffers) = 0;
    virtual Status flush() { return {}; }
    // Writes a record header and the guest RAM it describes. `ram` must stay mapped while the
    // stream lives, and a transport may read it after this call returns, until the peer has
    // consumed it: for guest RAM under dirty tracking that is safe, since a page changed after
    // its dirty bit was cleared is sent again in a later round (and the last round runs with
    // the vCPUs paused). By default it is an ordinary write.
    virtual Status write_ram(std::span<const uint8_t> header, std::span<const uint8_t> ram) {
        std::span<const uint8_t> parts[] = {header, ram};
        return write(std::span<const std::span<const uint8_t>>(parts));
    }
    virtual Status read_exact(std::span<uint8_t> out) = 0;
    // Waits until a read would find data (or the end), for at most `within`; an error when the
    // peer stays silent that long. Streams that cannot tell say yes at once.
    virtual Status await_readable(std::chrono::milliseconds within) {
        (void)within;
        return {};
    }

    // Puts bytes already read back in front of the unread ones (the next read returns them
    // first): how the multifd handshake hands an ordinary stream's first bytes back.
    virtual Status unread(std::span<const uint8_t> bytes) {
        (void)bytes;
        return Error("this stream cannot put bytes back");
    }
    // Cuts the stream both ways now, from any thread: a read or write blocked in another thread
    // returns with an error, as on a broken link (migrate_pause, a failed lane).
    virtual Status shutdown() { return Error("this stream cannot be cut"); }
    // Whether a read or write failed because the link did (the peer's end, a reset, silence past
    // the I/O timeout, a cut), not because of a cancel: a migration may resume over a new link.
    virtual bool link_broke() const { return false; }
    // What its errors call the peer, once a handshake has said which connection this is.
    virtual void set_peer(std::string peer) { (void)peer; }
    // The kernel's TLS for what this stream sends (kernel_tls.h), where the stream is one the
    // kernel can take (a TCP socket's); none elsewhere.
    virtual KernelTlsSender* kernel_tls() { return nullptr; }

    Status write(std::span<const uint8_t> data) {
        std::span<const uint8_t> one[] = {data};
        return write(std::span<const std::span<const uint8_t>>(one));
    }
};

// An in-memory stream: writes append to `out`, reads consume `in` (tests, fuzzing).
class MemoryStream final : public ByteStream {
public:
    explicit MemoryStream(std::vector<uint8_t> in = {}) : in_(std::move(in)) {}
    using ByteStream::write;
    Status write(std::span<const std::span<const uint8_t>> buffers) override;
    Status read_exact(std::span<uint8_t> out) override;
    Status unread(std::span<const uint8_t> bytes) override;
    const std::vector<uint8_t>& written() const { return out_; }
    size_t remaining() const { return in_.size() - pos_; }  // bytes not read yet

private:
    std::vector<uint8_t> in_;
    size_t pos_ = 0;
    std::vector<uint8_t> out_;
};

}  // namespace vmm::stream

// SocketStream: a ByteStream over a connected non-blocking socket. Small writes are gathered
// in a 64 KiB buffer; large ones go out with one sendmsg. Guest RAM (write_ram) is not copied
// at all where the kernel allows: its pages are vmspliced into a pipe and spliced into the
// socket, so the kernel hands references to them to the connection and the only copy is the
// receiver's; where splicing is refused, sendmsg straight from guest memory. Either way no
// staging copy of RAM exists. Every wait polls the socket and the cancel token, and silence
// longer than the I/O timeout is an error.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "vmm/common/fd.h"
#include "vmm/stream/cancel.h"
#include "vmm/stream/kernel_tls.h"
#include "vmm/stream/byte_stream.h"

namespace vmm::stream {

// What a socket stream's errors call what it carries, and the settings that bound its waits: a
// migration's by default; vmmd's libvirt clients are named in vmmd's words.
struct SocketWords {
    std::string carries = "migration";              // "... in the middle of the migration"
    std::string cancelled = "migration cancelled";  // what a cancel token's firing is
    std::string io_timeout_setting = "x-io-timeout";
    std::string first_words_setting = "x-connect-timeout";  // await_readable's bound
};

class SocketStream final : public ByteStream, public KernelTlsSender {
public:
    // `zero_copy`: splice guest RAM (write_ram) when the process ignores SIGPIPE.
    SocketStream(UniqueFd fd, const CancelToken& cancel, std::chrono::milliseconds io_timeout, std::string peer,
                 bool zero_copy = true, SocketWords words = {});

    using ByteStream::write;
    Status write(std::span<const std::span<const uint8_t>> buffers) override;
    Status flush() override;
    Status write_ram(std::span<const uint8_t> header, std::span<const uint8_t> ram) override;
    Status read_exact(std::span<uint8_t> out) override;
    Status await_readable(std::chrono::milliseconds within) override;
    Status unread(std::span<const uint8_t> bytes) override;
    Status shutdown() override;  // shutdown(2), both ways
    bool link_broke() const override { return link_broke_; }
    void set_peer(std::string peer) override { peer_ = std::move(peer); }
    KernelTlsSender* kernel_tls() override;  // TCP only
    Result<bool> kernel_tls_start(const KernelTlsKeys& keys) override;
    Result<uint64_t> kernel_tls_records() override;
    Status kernel_tls_renew(const KernelTlsKeys& next) override;
    // Whether guest RAM has gone out by splicing (false: copied by sendmsg).
    bool spliced() const { return spliced_any_; }

private:
    enum class Wait { readable, writable };
    Error lost(Error e) {  // the link failed (link_broke)
        link_broke_ = true;
        return e;
    }
    Status wait(Wait what) { return wait(what, timeout_, words_.io_timeout_setting); }
    Status wait(Wait what, std::chrono::milliseconds timeout, const std::string& setting);
    Status send_all(std::vector<std::span<const uint8_t>> parts);
    // Sends `ram` by vmsplice + splice; sets `unsent` to what is left when splicing turns out
    // not to be possible here (the caller sends that the ordinary way).
    Status splice_ram(std::span<const uint8_t> ram, std::span<const uint8_t>& unsent);
    // Moves n bytes from the pipe into the socket; returns fewer only when the very first
    // splice is refused (the connection cannot take spliced pages).
    Result<size_t> splice_out(size_t n, bool more);

    UniqueFd fd_;
    const CancelToken& cancel_;
    std::chrono::milliseconds timeout_;
    std::string peer_;
    SocketWords words_;
    std::vector<uint8_t> wbuf_;
    bool splice_ok_;
    bool spliced_any_ = false;
    UniqueFd pipe_read_, pipe_write_;  // for splicing guest RAM; created on first use
    size_t pipe_size_ = 0;
    std::vector<uint8_t> rbuf_;
    size_t rpos_ = 0;
    std::atomic<bool> link_broke_{false};  // postcopy reads and writes on two threads
};

// Whether the peer of a connected socket is on this host (loopback address, or a unix socket).
bool peer_on_this_host(int fd);

}  // namespace vmm::stream

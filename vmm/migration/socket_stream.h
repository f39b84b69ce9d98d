// SocketStream: a ByteStream over a connected non-blocking socket. Small writes are gathered
// in a 64 KiB buffer; large ones (pages) go out with one sendmsg straight from guest memory, so
// no staging copy of RAM exists. Every wait polls the socket and the cancel token, and silence
// longer than the I/O timeout is an error.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "vmm/common/fd.h"
#include "vmm/migration/cancel.h"
#include "vmm/migration/stream.h"

namespace vmm::migration {

class SocketStream final : public ByteStream {
public:
    SocketStream(UniqueFd fd, const CancelToken& cancel, std::chrono::milliseconds io_timeout, std::string peer);

    using ByteStream::write;
    Status write(std::span<const std::span<const uint8_t>> buffers) override;
    Status flush() override;
    Status read_exact(std::span<uint8_t> out) override;
    int fd() const { return fd_.get(); }

private:
    enum class Wait { readable, writable };
    Status wait(Wait what);
    Status send_all(std::vector<std::span<const uint8_t>> parts);

    UniqueFd fd_;
    const CancelToken& cancel_;
    std::chrono::milliseconds timeout_;
    std::string peer_;
    std::vector<uint8_t> wbuf_;
    std::vector<uint8_t> rbuf_;
    size_t rpos_ = 0;
};

}  // namespace vmm::migration

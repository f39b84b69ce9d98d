// PipeStream: a ByteStream over two pipes, for the tests that show the migration code takes any
// ByteStream and not only a socket's (docs/architecture.md, "Settings" and the rooms): no
// splicing, no socket calls. Every wait also ends on its cancel token or on shutdown().
// pipe_stream_pair() gives both ends of one connection.
#pragma once

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "vmm/common/fd.h"
#include "vmm/stream/cancel.h"
#include "vmm/stream/byte_stream.h"

namespace vmm::test {

class PipeStream final : public stream::ByteStream {
public:
    // `cancel` (may be null) ends every wait, as a migration's token does a socket's.
    PipeStream(UniqueFd read_fd, UniqueFd write_fd, const stream::CancelToken* cancel);

    using stream::ByteStream::write;
    Status write(std::span<const std::span<const uint8_t>> buffers) override;
    Status read_exact(std::span<uint8_t> out) override;
    Status await_readable(std::chrono::milliseconds within) override;
    Status unread(std::span<const uint8_t> bytes) override;
    // Cuts it: a read or write blocked in another thread returns, and every later one fails.
    Status shutdown() override;

private:
    Status wait(int fd, short events, int timeout_ms);
    UniqueFd read_, write_;
    const stream::CancelToken* cancel_;
    UniqueFd wake_read_, wake_write_;  // written once by shutdown(): blocked calls return
    std::atomic<bool> cut_{false};
    std::vector<uint8_t> pushed_back_;
};

// Both ends of one connection over two pipes; `source_cancel`/`dest_cancel` as above.
std::pair<std::unique_ptr<stream::ByteStream>, std::unique_ptr<stream::ByteStream>> pipe_stream_pair(
    const stream::CancelToken* source_cancel = nullptr, const stream::CancelToken* dest_cancel = nullptr);
// The same, and a second writer of the destination's end (what the source reads), for a test
// that plays a destination writing from two threads.
struct PipeConnection {
    std::unique_ptr<stream::ByteStream> source, dest;
    UniqueFd to_source;
};
PipeConnection pipe_connection(const stream::CancelToken* source_cancel, const stream::CancelToken* dest_cancel);

}  // namespace vmm::test

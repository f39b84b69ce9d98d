// FileMessages: the migration's byte stream over the control channel (spec: "QEMUFileRDMA
// Interface"): what vmm writes goes out in QEMU File messages of at most one control buffer
// each; a read takes the next message and keeps its unread rest for the next read. A RAM BLOCKS
// REQUEST that arrives while the destination reads the stream is handed to `blocks_requested`
// (the destination answers it; a source refuses).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "control_channel.h"

namespace rdma_migrate {

class FileMessages {
public:
    FileMessages(ControlChannel& ctl, std::function<Status()> blocks_requested)
        : ctl_(ctl), blocks_requested_(std::move(blocks_requested)) {}

    Status write(const void* data, size_t len);  // sends every whole message's worth
    Status flush();                              // sends the rest
    Status read(void* out, size_t len);

private:
    ControlChannel& ctl_;
    std::function<Status()> blocks_requested_;
    std::vector<uint8_t> out_, in_;
    size_t in_pos_ = 0;
};

}  // namespace rdma_migrate

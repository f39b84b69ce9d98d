// ControlBuffers: the control channel's buffers (kReceives receives and one send, each
// kControlBufferSize: 1.5 MiB) in one mapping, faulted in when the set is made.
//
// Why ahead of the connection: registering three buffers just allocated cost a connection's
// setup 15 to 317 ms in the nested VM (run to run; 23 to 88 ms at the destination, inside the
// source's wait for the connection), nearly all of it the first touch of fresh memory, which
// there costs the host a fault too. A process keeps one set spare: the plugin's warm-up makes
// it (on vmm's warming thread), a control channel takes the spare or, if there is none, makes a
// set, and gives its set back when it goes (its registrations gone, its queue pair destroyed
// before: no DMA can reach the buffers then), wiped, so the next migration finds one ready too.
// The cost: 1.5 MiB of an idle vmm's memory on a machine with an RDMA device.
#pragma once

#include <memory>
#include <span>

#include "proto/wire.h"
#include "vmm/common/mapping.h"

namespace rdma_migrate {

class ControlBuffers {
public:
    static constexpr size_t kReceives = 2;
    static constexpr size_t kCount = kReceives + 1;

    // A new set, its pages faulted in.
    static Result<std::unique_ptr<ControlBuffers>> make();
    // The spare set, or a new one if there is none.
    static Result<std::unique_ptr<ControlBuffers>> take();
    // Wipes `set` and keeps it as the spare, if there is none yet.
    static void give_back(std::unique_ptr<ControlBuffers> set) noexcept;
    // Makes the spare if there is none (the plugin's warm-up).
    static void make_spare() noexcept;

    std::span<uint8_t> receive(size_t i) const { return {map_.data() + i * kControlBufferSize, kControlBufferSize}; }
    std::span<uint8_t> send() const { return {map_.data() + kReceives * kControlBufferSize, kControlBufferSize}; }

private:
    explicit ControlBuffers(vmm::Mapping map) : map_(std::move(map)) {}
    // Keeps `set` as the spare if there is none; else it is unmapped.
    static void keep(std::unique_ptr<ControlBuffers> set) noexcept;
    vmm::Mapping map_;
};

}  // namespace rdma_migrate

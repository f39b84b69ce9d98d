// VmmEvents: one running vmm's QMP events (MIGRATION with its status, STOP, RESUME,
// X_MIGRATION_STALLED …), read on a QMP connection of their own by a thread of their own and
// handed to a sink: vmmd relays them to libvirt's `virsh qemu-monitor-event` clients
// (daemon/monitor_events.h). The thread ends when the vmm closes the connection (it ended) or
// when the VmmEvents is destroyed; commands never go over this connection, so an event is never
// held behind a slow one.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "vmm/common/result.h"
#include "vmm/monitor/client/qmp_client.h"

namespace vmmd {

class VmmEvents {
public:
    using Sink = std::function<void(const vmm::monitor::Json& event)>;

    // Connects to the vmm's QMP socket at `socket` (it answers already: within `timeout`) and
    // starts reading; `sink` runs on the reader's thread for each event, in the vmm's order.
    static vmm::Result<std::unique_ptr<VmmEvents>> open(const std::string& socket, Sink sink,
                                                        std::chrono::milliseconds timeout = std::chrono::seconds(2));
    ~VmmEvents();  // wakes the reader and joins it
    VmmEvents(const VmmEvents&) = delete;
    VmmEvents& operator=(const VmmEvents&) = delete;

private:
    VmmEvents(std::unique_ptr<vmm::monitor::QmpClient> client, Sink sink)
        : client_(std::move(client)), sink_(std::move(sink)) {}
    void read_all();

    std::unique_ptr<vmm::monitor::QmpClient> client_;
    Sink sink_;
    std::atomic<bool> stopping_{false};
    std::thread reader_;
};

}  // namespace vmmd

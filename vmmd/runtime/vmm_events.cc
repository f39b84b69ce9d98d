#include "vmmd/runtime/vmm_events.h"

#include <exception>

#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"

namespace vmmd {

namespace {
// How long one wait for the next event lasts; the reader waits again after it (a vmm may be
// quiet for hours). Stopping does not wait for it: interrupt() wakes the reader at once.
constexpr std::chrono::hours kQuietWait{1};
}  // namespace

vmm::Result<std::unique_ptr<VmmEvents>> VmmEvents::open(const std::string& socket, Sink sink,
                                                        std::chrono::milliseconds timeout) {
    auto client = vmm::monitor::QmpClient::connect(socket, timeout);
    if (!client) return client.error().context("the vmm's QMP socket for its events");
    std::unique_ptr<VmmEvents> e(new VmmEvents(std::move(*client), std::move(sink)));
    e->reader_ = std::thread([p = e.get()] { p->read_all(); });
    return e;
}

VmmEvents::~VmmEvents() {
    stopping_ = true;
    client_->interrupt();
    if (reader_.joinable()) reader_.join();
}

void VmmEvents::read_all() {
    vmm::name_this_thread("vmmd-events");
    try {
        for (;;) {
            auto e = client_->next_event(kQuietWait);
            if (!e) {  // the vmm ended (or is ending): nothing more will come
                if (!stopping_) vmm::log::debug("vmmd: a vmm's event connection ended: {}", e.error().message());
                return;
            }
            if (*e) sink_(**e);
        }
    } catch (const std::exception& x) {  // the sink's allocation, at worst: the vmm runs on, unrelayed
        vmm::log::warn("vmmd: a vmm's events are no longer relayed: {}", x.what());
    }
}

}  // namespace vmmd

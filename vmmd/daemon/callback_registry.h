// CallbackRegistry: the event callbacks libvirt clients registered, by connection, for the two
// event hubs (events.h: libvirt's domain events; monitor_events.h: the QEMU program's monitor
// events). Each connection's outbox is where its events go; its callbacks end with it or when
// deregistered. Callback ids are numbered from 1 across connections.
#pragma once

#include <fmt/format.h>
#include <libvirt/virterror.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "vmmd/rpc/dispatch.h"
#include "vmmd/server/outbox.h"

namespace vmmd {

// Callback: a movable type with an `int32_t id` member.
template <typename Callback>
class CallbackRegistry {
public:
    using Target = std::pair<std::shared_ptr<Outbox>, int32_t>;  // where an event goes, and for which callback

    explicit CallbackRegistry(size_t max_per_connection) : max_(max_per_connection) {}

    void connected(uint64_t connection, std::shared_ptr<Outbox> outbox) {
        std::lock_guard lock(mutex_);
        connections_[connection].outbox = std::move(outbox);
    }
    void disconnected(uint64_t connection) {
        std::lock_guard lock(mutex_);
        connections_.erase(connection);
    }

    // Registers `cb` on `connection`, its id given here: the reply (the id, or why not), the id
    // also in *given. `what` names the kind in the refusal ("event callbacks").
    rpc::Reply add(uint64_t connection, Callback cb, const char* what, int32_t* given) {
        std::lock_guard lock(mutex_);
        auto it = connections_.find(connection);
        if (it == connections_.end()) return rpc::fail(VIR_ERR_INTERNAL_ERROR, "this connection cannot receive events");
        if (it->second.callbacks.size() >= max_) {
            return rpc::fail(VIR_ERR_OPERATION_FAILED, fmt::format("a connection may hold at most {} {}", max_, what));
        }
        cb.id = next_++;
        *given = cb.id;
        it->second.callbacks.push_back(std::move(cb));
        return rpc::ok_i32(*given);
    }

    rpc::Reply remove(uint64_t connection, int32_t id) {
        std::lock_guard lock(mutex_);
        if (auto it = connections_.find(connection); it != connections_.end()) {
            auto& cbs = it->second.callbacks;
            for (auto c = cbs.begin(); c != cbs.end(); ++c) {
                if (c->id != id) continue;
                cbs.erase(c);
                return rpc::ok();
            }
        }
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("callback {} is not registered on this connection", id));
    }

    // Every callback `wants` accepts (called under the registry's lock: it must not call back).
    template <typename Wants>
    std::vector<Target> targets(const Wants& wants) {
        std::vector<Target> to;
        std::lock_guard lock(mutex_);
        for (const auto& [conn, c] : connections_)
            for (const Callback& cb : c.callbacks)
                if (wants(cb)) to.emplace_back(c.outbox, cb.id);
        return to;
    }

private:
    struct Connection {
        std::shared_ptr<Outbox> outbox;
        std::vector<Callback> callbacks;
    };
    const size_t max_;
    std::mutex mutex_;
    std::map<uint64_t, Connection> connections_;
    int32_t next_ = 1;
};

}  // namespace vmmd

// RDMA-CM and verbs helpers endpoint.cc uses, shared with the pull server (pull_server.h), which
// runs its own event loop over many connections instead of an Endpoint's one.
#pragma once

#include <netdb.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "verbs.h"

namespace rdma_migrate {

// Move-only owner of a getaddrinfo() result.
using AddrInfo = std::unique_ptr<addrinfo, Deleter<::freeaddrinfo>>;
Result<AddrInfo> resolve(const std::string& host, uint16_t port, bool passive);
// A non-blocking event channel; its failure says the host has no usable RDMA device.
Result<EventChannel> make_event_channel();

// One CM event, copied out and acknowledged at once (its private data lives only until the
// ack). Every reader of an event channel takes its events through take_cm_event.
struct CmEvent {
    rdma_cm_event_type type{};
    int status = 0;
    rdma_cm_id* id = nullptr;  // for a connection request: a new id, ours to accept or refuse
    std::vector<uint8_t> private_data;
    // A connection request's READs that this side may issue at once: the requester's
    // responder_resources, which the kernel reports from this side's view, as initiator_depth.
    uint8_t reads_to_issue = 0;
};
// The next event waiting on `ch` (non-blocking), or nullopt: none waiting (errno EAGAIN), or
// reading failed (errno says why).
std::optional<CmEvent> take_cm_event(rdma_event_channel* ch);
// Turns down a connection request (its id is ours to destroy), saying why in the reject data.
void refuse(rdma_cm_id* id, const std::string& why);
// Connection requests that reached a destination while it waited for another event: the next
// channel's request, sent by a source as soon as it saw this one established, can arrive before
// this side's ESTABLISHED (the CM's RTU travels on its own). Kept for the next wait for a
// request; each id is ours, and those left when the holder goes are refused.
class EarlyRequests {
public:
    EarlyRequests() = default;
    EarlyRequests(const EarlyRequests&) = delete;
    EarlyRequests& operator=(const EarlyRequests&) = delete;
    ~EarlyRequests() { refuse_all("this migration is over"); }
    void keep(CmEvent ev) { kept_.push_back(std::move(ev)); }
    std::optional<CmEvent> take();
    void refuse_all(const std::string& why);

private:
    std::deque<CmEvent> kept_;
};
// A completion channel (non-blocking, so a wait polls it) and a CQ of `depth` entries on it.
Status make_cq(ibv_context* ctx, int depth, CompletionChannel& channel, CompletionQueue& cq);
// READs at once on a queue pair of `ctx`, at most `wanted` and what its adapter allows: issued
// (max_qp_init_rd_atom) or taken (max_qp_rd_atom); at least 1, the lanes' and QEMU's.
uint8_t read_depth(ibv_context* ctx, bool issued, uint8_t wanted);

}  // namespace rdma_migrate

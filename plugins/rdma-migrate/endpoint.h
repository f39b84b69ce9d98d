// Endpoint (spec: "RDMA Protocol Description", steps 1-6): an RC queue pair set up through
// RDMA-CM, with its PD, completion channel and CQ. Both sides post receives before connecting
// (the caller's `before_connect` does that); the private data carries {version, flags} and the
// destination answers with the flags it supports.
//
// Every wait polls the CM event channel, the completion channel and the cancel fd together, so a
// disconnect, a device removal, a cancel or silence longer than the I/O timeout ends it at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cm.h"
#include "memory_registry.h"
#include "pinned_ahead.h"
#include "steps.h"
#include "verbs.h"
#include "proto/wire.h"

namespace rdma_migrate {

struct Endpoint {
    // Parent-first: destroyed in reverse (QP, CQ, channel, PD, ids, event channel).
    EventChannel events;  // empty on a destination's extra channel (its events go to channel 0's)
    CmId listen_id;  // destination only
    EarlyRequests early_requests;  // destination only: destroyed (refused) before the ids above
    CmId id;
    ProtectionDomain pd;         // owned by channel 0
    // A destination's listener that pins its RAM while it waits, and the channel 0 it accepts on
    // the same device, which is made on that PD instead of its own (pinned_ahead.h).
    std::shared_ptr<PinnedAhead> ahead;
    ibv_pd* shared_pd = nullptr; // channels 1..N-1 use channel 0's, so one rkey serves them all
    CompletionChannel channel;
    CompletionQueue cq;
    // With QpShape::split (the postcopy channel): receives complete here and sends in `cq`, so
    // one thread may wait on each.
    CompletionChannel recv_channel;
    CompletionQueue recv_cq;
    QueuePair qp;
    int cancel_fd = -1;
    int io_timeout_ms = 0;  // x-io-timeout: set from Timeouts when the endpoint is made
    PrivateData peer;        // what the other side sent in its private data
    std::string describe;    // "rdma 10.0.0.1:4444"
    bool disconnected = false;
    bool device_removed = false;  // RDMA_CM_EVENT_DEVICE_REMOVAL seen: nothing more will come
    // The connection failed because its link did: the peer's disconnect or a cut, retries
    // exhausted, or silence past x-io-timeout (not this side's own hang-up, not a device removed,
    // not a request the adapter refused). Atomic: a cut (migrate_pause) sets it from the
    // monitor's thread while the migration's thread reads it.
    std::atomic<bool> link_lost = false;
    bool probe_posted = false;  // a liveness probe (progress) awaits its completion
    bool grants_remote_write = false;  // a destination's: the peer may RDMA WRITE into its memory
    // RDMA READs at once, as agreed when connecting: those this side takes from the peer and
    // those it issues. 1 and 1 on every queue pair but the postcopy channel's (whose destination
    // reads missing pages with x-rdma-postcopy-read).
    uint8_t reads_taken = 1, reads_issued = 1;
    std::vector<TimedStep> steps;  // channel 0: how long each step of making it took

    ~Endpoint();
    // Stops all DMA on this connection, so its buffers and MRs may go: disconnects (flushing
    // what is posted) unless the peer or a device removal already ended it, and destroys the QP.
    void hang_up();
    // The side that received the last message waits, at most max_ms, for the peer to hang up
    // first: the peer counts that message delivered only once its completion says so, and a
    // hang-up from this side could flush it there first. A cancel (vmm ending) ends the wait.
    void await_peer_hang_up(int max_ms);
    // A destination's channel 0 that will not be used (its peer failed authentication): the
    // listening id and the event channel it took at accept go back to `listener`, which waits on.
    void give_back_listener(Endpoint& listener);
    ibv_pd* protection_domain() const { return pd ? pd.get() : ahead ? ahead->pd() : shared_pd; }
    MemoryRegistry memory() const { return MemoryRegistry(protection_domain()); }
    // Hands every completion to `on_wc` until `done()` holds; waits on the completion channel
    // when the CQ is empty. Any failed completion, CM event or cancel ends it with an error, and
    // so does silence for `timeout_ms` (-1: io_timeout_ms).
    Status progress(const std::function<Status(const ibv_wc&)>& on_wc, const std::function<bool()>& done,
                    int timeout_ms = -1);
    // Hands over what the CQ holds now, without waiting.
    Status reap(const std::function<Status(const ibv_wc&)>& on_wc);
    // The work request id of a liveness probe (progress): no WrKind's.
    static constexpr uint64_t kProbeWrId = 0xffull << 56;
    // After this long without a completion or an event, a wait probes the peer: a zero-length
    // RDMA WRITE (no rkey needed, no receive used, unseen by the peer's software), which its
    // adapter acknowledges while its queue pair lives. A peer gone, or a link down, fails it
    // with the transport's retries exhausted within seconds, where silence would take
    // x-io-timeout; so both sides of a broken link learn it soon, not only the one sending.
    static constexpr int kProbeAfterMs = 1000;

private:
    // A CM event while data flows: about this connection (or a device removal) it ends the
    // migration; a stranger's connection request is refused; other channels' events are theirs.
    Status cm_event_while_busy();
    // Polls the CQ once and hands each successful completion to on_wc; a flushed request sets
    // flushed. Returns how many completions were polled.
    Result<int> take_completions(const std::function<Status(const ibv_wc&)>& on_wc, bool& flushed);
    void probe();  // posts a liveness probe unless one is out
    // After a device removal: lets librdmacm close the removed device once this Endpoint's
    // objects are destroyed, so the removal can complete while the process runs on.
    static void let_go_of_removed_devices();
    // Whether the CM events left unread (read and acknowledged now) include a device removal.
    bool removal_pending();
    // Why the QP flushed its work when nothing failed on this side and this side did not hang
    // up: a CM event waiting (the peer hung up, the device went), or the adapter ending the
    // connection over a request from the peer that broke its rules (its async event, if the
    // driver gives one: SoftRoCE before Linux 6.5 does not).
    std::string flush_reason();
};

// x-connect-timeout and x-io-timeout, as vmm passes them (plugin_abi.h). The defaults are
// vmm's, for the tests that build an endpoint without a vmm.
struct Timeouts {
    int connect_ms = 10000;
    int io_ms = 30000;
};

constexpr uint32_t kSendQueueDepth = 512;
constexpr uint8_t kPcReadsAtOnce = 16;  // the postcopy channel's READs at once, where the adapters allow
constexpr uint32_t kRecvQueueDepth = 4;

using BeforeConnect = std::function<Status(Endpoint&)>;

// The queue pair's shape: the lanes' and the control channel's default, or the postcopy
// channel's (its own CQ for receives, and room for a receive per landing slot).
struct QpShape {
    bool split = false;
    uint32_t recv_depth = kRecvQueueDepth;
};

// Source: resolve, create the QP, `before_connect` (post receives), connect with `ours`. An
// extra channel (ours.channel > 0) passes channel 0's PD as `shared_pd`.
Result<std::unique_ptr<Endpoint>> connect_endpoint(const std::string& host, uint16_t port, const PrivateData& ours,
                                                   int cancel_fd, Timeouts t, const BeforeConnect& before_connect,
                                                   ibv_pd* shared_pd = nullptr, QpShape shape = {});

// Destination: a listening id; accept_endpoint() takes one connection from it, refusing another
// protocol version, and answers with the flags this side supports (`supported` & theirs).
Result<std::unique_ptr<Endpoint>> listen_endpoint(const std::string& host, uint16_t port, int cancel_fd, Timeouts t);
// `admit`, when set, may turn a request down by its private data (the request is rejected with
// the reason, and the listener stays as it was).
using Admit = std::function<Status(const PrivateData&)>;
// `wait_ms`: how long to wait for a request (-1: until one comes or the cancel fd fires).
Result<std::unique_ptr<Endpoint>> accept_endpoint(Endpoint& listener, uint32_t supported, const BeforeConnect& before_connect,
                                                  const Admit& admit = {}, int wait_ms = -1);
// Destination: channel `index` of the migration `primary` (an accepted channel 0) belongs to.
// A request from another migration, or out of order, is rejected and ends the accept. The new
// channel shares primary's PD and reports its CM events on primary's event channel.
Result<std::unique_ptr<Endpoint>> accept_channel(Endpoint& primary, uint32_t index, QpShape shape = {});

}  // namespace rdma_migrate

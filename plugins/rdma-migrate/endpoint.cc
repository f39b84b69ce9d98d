#include "endpoint.h"

#include <cctype>

#include <fcntl.h>

#include <cerrno>
#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include "cm.h"
#include "trace.h"

namespace rdma_migrate {

Result<AddrInfo> resolve(const std::string& host, uint16_t port, bool passive) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc != 0) return Error(fmt::format("cannot resolve '{}': {}", host, ::gai_strerror(rc)));
    return AddrInfo(res);
}

Result<EventChannel> make_event_channel() {
    EventChannel ec(rdma_create_event_channel());
    if (!ec) {
        return Error::from_errno("rdma_create_event_channel", errno,
                                 "this host has no usable RDMA device: load one (e.g. rdma_rxe and 'rdma link add') "
                                 "or migrate over tcp:");
    }
    int flags = ::fcntl(ec->fd, F_GETFL);
    ::fcntl(ec->fd, F_SETFL, flags | O_NONBLOCK);
    return ec;
}

namespace {

// A fresh endpoint with its own event channel and one RDMA-CM id on it, in `slot`.
Result<std::unique_ptr<Endpoint>> new_endpoint(int cancel_fd, Timeouts t, std::string describe, CmId Endpoint::*slot) {
    auto e = std::make_unique<Endpoint>();
    e->cancel_fd = cancel_fd;
    e->io_timeout_ms = t.io_ms;
    e->describe = std::move(describe);
    auto ec = make_event_channel();
    if (!ec) return ec.error();
    e->events = std::move(*ec);
    rdma_cm_id* raw = nullptr;
    if (rdma_create_id(e->events.get(), &raw, nullptr, RDMA_PS_TCP) != 0) return verbs_error("rdma_create_id");
    ((*e).*slot).reset(raw);
    return e;
}

}  // namespace

std::optional<CmEvent> take_cm_event(rdma_event_channel* ch) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch, &ev) != 0) return std::nullopt;
    CmEvent out{ev->event, ev->status, ev->id, {}, ev->param.conn.initiator_depth};
    const auto* data = static_cast<const uint8_t*>(ev->param.conn.private_data);
    if (data != nullptr) out.private_data.assign(data, data + ev->param.conn.private_data_len);
    rdma_ack_cm_event(ev);
    return out;
}

void refuse(rdma_cm_id* id, const std::string& why) {
    rdma_reject(id, why.data(), static_cast<uint8_t>(std::min<size_t>(why.size(), 148)));
    rdma_destroy_id(id);
}

std::optional<CmEvent> EarlyRequests::take() {
    if (kept_.empty()) return std::nullopt;
    CmEvent ev = std::move(kept_.front());
    kept_.pop_front();
    return ev;
}

void EarlyRequests::refuse_all(const std::string& why) {
    for (const CmEvent& ev : kept_) refuse(ev.id, why);
    kept_.clear();
}

namespace {

// Why a connection request was rejected. On IB and RoCE the event's status is the CM's reject
// reason (InfiniBand spec, REJ message): 28 when the other side's application rejected it, and
// a vmm destination then says why in the private data (refuse() above); 8 when nothing listens
// on that port.
std::string rejection(const CmEvent& ev, const char* what) {
    constexpr int kRejInvalidServiceId = 8, kRejConsumer = 28;
    if (ev.status == kRejConsumer) {
        std::string reason;
        for (size_t i = 0; i < ev.private_data.size() && ev.private_data[i] != '\0'; ++i) {
            char c = static_cast<char>(ev.private_data[i]);
            reason += std::isprint(static_cast<unsigned char>(c)) != 0 ? c : '?';
        }
        if (!reason.empty()) return fmt::format("{}: the destination refused: {}", what, reason);
        return fmt::format("{}: the destination refused the connection (is it a vmm --incoming rdma:?)", what);
    }
    if (ev.status == kRejInvalidServiceId) {
        return fmt::format("{}: nothing listens there; start the destination with --incoming rdma:HOST:PORT first", what);
    }
    return fmt::format("{}: rejected (CM reject reason {}); is a vmm --incoming rdma: listening there?", what, ev.status);
}

// What one CM event means to a wait for `want`: nothing wrong (the event wanted, its private
// data decoded into `pd` if asked for), a rejection with its reason, or an error.
Status expected_event(Endpoint& e, const CmEvent& ev, rdma_cm_event_type want, const char* what, PrivateData* pd) {
    if (ev.type == want) {
        if (pd == nullptr) return {};
        auto p = decode_private_data(ev.private_data);
        if (!p) return p.error();
        *pd = *p;
        return {};
    }
    if (ev.type == RDMA_CM_EVENT_REJECTED) {
        constexpr int kRejInvalidServiceId = 8;  // nothing listens on that port (rejection() above)
        return ev.status == kRejInvalidServiceId ? Error::with_errno(rejection(ev, what), ECONNREFUSED)
                                                 : Error(rejection(ev, what));
    }
    if (ev.type == RDMA_CM_EVENT_DEVICE_REMOVAL) e.device_removed = true;
    return ev.status < 0 ? Error::from_errno(fmt::format("{}: {}", what, rdma_event_str(ev.type)), -ev.status)
                         : Error(fmt::format("{}: {} (status {})", what, rdma_event_str(ev.type), ev.status));
}

// One CM event of the expected type (its private data copied into `pd` if asked); any other
// event, a cancel or silence for `timeout_ms` ends the wait with an error. `new_id` receives
// the wanted event's id (a connection request's, ours to own even when its data is refused).
Status wait_cm(Endpoint& e, rdma_cm_event_type want, int timeout_ms, const char* what, PrivateData* pd = nullptr,
               rdma_cm_id** new_id = nullptr, uint8_t* peer_reads = nullptr) {
    for (;;) {
        std::optional<CmEvent> ev = want == RDMA_CM_EVENT_CONNECT_REQUEST ? e.early_requests.take() : std::nullopt;
        if (!ev) ev = take_cm_event(e.events.get());
        if (ev) {
            trace("{}: cm event {} (status {}) while waiting for {}{}", e.describe, rdma_event_str(ev->type), ev->status,
                  rdma_event_str(want), e.listen_id && ev->id == e.listen_id.get() ? " (the listening id)" : "");
            // A destination accepting a connection: the source's next channel may ask first.
            if (ev->type == RDMA_CM_EVENT_CONNECT_REQUEST && want != ev->type && e.listen_id) {
                e.early_requests.keep(std::move(*ev));
                continue;
            }
            // A listener waiting for its next source: a connection it had (a broken link's, now
            // ended) may still report on this channel; that is no answer to the wait.
            if (want == RDMA_CM_EVENT_CONNECT_REQUEST && ev->type != want && ev->type != RDMA_CM_EVENT_DEVICE_REMOVAL &&
                e.listen_id && ev->id != e.listen_id.get()) {
                continue;
            }
            if (new_id != nullptr && ev->type == want) *new_id = ev->id;
            if (peer_reads != nullptr && ev->type == want) *peer_reads = ev->reads_to_issue;
            return expected_event(e, *ev, want, what, pd);
        }
        if (errno != EAGAIN) return verbs_error(std::string(what) + ": rdma_get_cm_event");
        pollfd fds[2] = {{e.events->fd, POLLIN, 0}, {e.cancel_fd, POLLIN, 0}};
        int r = ::poll(fds, 2, timeout_ms);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return verbs_error("poll");
        if (fds[1].revents != 0) return Error::with_errno("migration cancelled", ECANCELED);
        if (r == 0) {
            return Error::with_errno(fmt::format("{}: no answer within {} ms; is the peer up and reachable over RDMA "
                                                 "(x-connect-timeout sets the wait)?",
                                                 what, timeout_ms),
                                     ETIMEDOUT);
        }
    }
}

}  // namespace

Status make_cq(ibv_context* ctx, int depth, CompletionChannel& channel, CompletionQueue& cq) {
    channel.reset(ibv_create_comp_channel(ctx));
    if (!channel) return verbs_error("ibv_create_comp_channel");
    int flags = ::fcntl(channel->fd, F_GETFL);
    ::fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK);
    cq.reset(ibv_create_cq(ctx, depth, nullptr, channel.get(), 0));
    if (!cq) return verbs_error("ibv_create_cq");
    return posted(ibv_req_notify_cq(cq.get(), 0), "ibv_req_notify_cq");
}

uint8_t read_depth(ibv_context* ctx, bool issued, uint8_t wanted) {
    ibv_device_attr attr{};
    if (ctx == nullptr || ibv_query_device(ctx, &attr) != 0) return 1;
    int most = issued ? attr.max_qp_init_rd_atom : attr.max_qp_rd_atom;
    return static_cast<uint8_t>(std::clamp<int>(std::min<int>(most, wanted), 1, 255));
}

namespace {

Status create_resources(Endpoint& e, ibv_pd* shared_pd, QpShape shape) {
    ibv_context* ctx = e.id->verbs;
    if (ctx == nullptr) return Error("the RDMA-CM id has no device: is an RDMA device bound to that address?");
    if (shared_pd != nullptr) {
        if (shared_pd->context != ctx) return Error("an RDMA channel reached another device than channel 0: use one address");
        e.shared_pd = shared_pd;
    } else if (!e.ahead) {
        e.pd.reset(ibv_alloc_pd(ctx));
        if (!e.pd) return verbs_error("ibv_alloc_pd");
    }
    int depth = static_cast<int>(kSendQueueDepth + (shape.split ? 0 : shape.recv_depth));
    if (auto s = make_cq(ctx, depth, e.channel, e.cq); !s) return s;
    if (shape.split)
        if (auto s = make_cq(ctx, static_cast<int>(shape.recv_depth), e.recv_channel, e.recv_cq); !s) return s;
    ibv_qp_init_attr attr{};
    attr.send_cq = e.cq.get();
    attr.recv_cq = shape.split ? e.recv_cq.get() : e.cq.get();
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = kSendQueueDepth;
    attr.cap.max_recv_wr = shape.recv_depth;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    if (rdma_create_qp(e.id.get(), e.protection_domain(), &attr) != 0) return verbs_error("rdma_create_qp");
    e.qp = QueuePair(e.id.get());
    return {};
}

// `e`'s READs at once: those it takes (responder_resources) and those it issues (initiator_depth).
rdma_conn_param conn_param(const std::vector<uint8_t>& pd, const Endpoint& e) {
    rdma_conn_param p{};
    p.private_data = pd.data();
    p.private_data_len = static_cast<uint8_t>(pd.size());
    p.responder_resources = e.reads_taken;
    p.initiator_depth = e.reads_issued;
    p.retry_count = 7;
    p.rnr_retry_count = 7;
    return p;
}

}  // namespace

Endpoint::~Endpoint() {
    // The peer may have reported the removal first (its ERROR ended the migration): ours may
    // still wait in the event channel.
    if (events && !device_removed) device_removed = removal_pending();
    hang_up();
    if (device_removed) let_go_of_removed_devices();
}

void Endpoint::hang_up() {
    if (id && !disconnected && !device_removed) rdma_disconnect(id.get());
    disconnected = true;
    qp.reset();
}

void Endpoint::give_back_listener(Endpoint& listener) {
    hang_up();  // this connection first, while its events still have a channel to go to
    early_requests.refuse_all("the migration they belonged to is over");
    if (!listen_id) return;  // given back already
    listener.events = std::move(events);
    listener.listen_id = std::move(listen_id);
}

void Endpoint::await_peer_hang_up(int max_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(max_ms);
    while (events && id && !disconnected && !device_removed) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd fds[2] = {{events->fd, POLLIN, 0}, {cancel_fd, POLLIN, 0}};  // fd -1: ignored
        int r = left.count() > 0 ? ::poll(fds, 2, static_cast<int>(left.count())) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || fds[1].revents != 0) return;  // the peer is still there, or vmm is ending
        (void)cm_event_while_busy();  // records a disconnect or a removal; refuses strangers
    }
}

bool Endpoint::removal_pending() {
    bool removed = false;
    while (auto ev = take_cm_event(events.get())) {  // the channel is non-blocking
        if (ev->type == RDMA_CM_EVENT_DEVICE_REMOVAL) removed = true;
        if (ev->type == RDMA_CM_EVENT_CONNECT_REQUEST) refuse(ev->id, "this migration is over");  // its id is ours
    }
    return removed;
}

// librdmacm keeps every device it has used open (a verbs context) for the life of the process,
// and the kernel finishes removing a device only once every context on it is closed: an HCA
// without "disassociate" support, SoftRoCE among them, waits for ever. Listing the devices
// marks those that are gone as dead, and librdmacm closes a dead device when its last id is
// destroyed, which the members of this Endpoint are about to be. (The listing also opens the
// devices this process had not used yet.)
void Endpoint::let_go_of_removed_devices() {
    int n = 0;
    if (ibv_context** list = rdma_get_devices(&n); list != nullptr) rdma_free_devices(list);
}

Status Endpoint::cm_event_while_busy() {
    auto ev = take_cm_event(events.get());
    if (!ev) return {};
    if (ev->type == RDMA_CM_EVENT_CONNECT_REQUEST) {  // somebody else, mid-migration: not now
        refuse(ev->id, "a migration is in progress");
        return {};
    }
    // Another channel of this migration: its own completions report its failures.
    if (ev->id != id.get() && ev->type != RDMA_CM_EVENT_DEVICE_REMOVAL) return {};
    if (ev->type == RDMA_CM_EVENT_DISCONNECTED) disconnected = true;
    if (ev->type == RDMA_CM_EVENT_DEVICE_REMOVAL) device_removed = true;
    // The peer hung up or the network ended the connection: a new one may work. A device that
    // went is not waited for (its migration fails, and the device is let go at once).
    if (ev->type == RDMA_CM_EVENT_DISCONNECTED) link_lost = true;
    return Error(fmt::format("{}: {}", describe, rdma_event_str(ev->type)));
}

namespace {
// The adapter's own word on a QP that failed (hardware such as mlx5 reports these), if it gave one.
std::string async_qp_event(ibv_context* ctx, ibv_qp* qp) {
    if (ctx == nullptr || qp == nullptr) return "";
    int flags = ::fcntl(ctx->async_fd, F_GETFL);
    if (flags < 0 || ::fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK) != 0) return "";
    std::string what;
    ibv_async_event ev{};
    while (ibv_get_async_event(ctx, &ev) == 0) {
        bool ours = (ev.event_type == IBV_EVENT_QP_ACCESS_ERR || ev.event_type == IBV_EVENT_QP_REQ_ERR ||
                     ev.event_type == IBV_EVENT_QP_FATAL) && ev.element.qp == qp;
        if (ours && what.empty()) what = ibv_event_type_str(ev.event_type);
        ibv_ack_async_event(&ev);
    }
    return what;
}
}  // namespace

std::string Endpoint::flush_reason() {
    for (int i = 0; events && i < 8; ++i)  // each call takes at most one event
        if (Status s = cm_event_while_busy(); !s) return s.error().message();
    std::string event = async_qp_event(id ? id->verbs : nullptr, qp.get());
    std::string adapter = event.empty() ? "" : " (the adapter reported: " + event + ")";
    // Flushed after this side disconnected (a cut: migrate_pause) or the link was found lost:
    // nobody broke a rule.
    if (link_lost) return fmt::format("{}: the link was cut, and the adapter flushed what was in flight{}", describe, adapter);
    if (grants_remote_write) {
        return fmt::format("{}: the source wrote where it was not allowed (remote access error): the adapter refused a "
                           "request outside the memory this side registered for it, and ended the connection{}",
                           describe, adapter);
    }
    return fmt::format("{}: the adapter ended the connection over a request from the destination that broke its rules "
                       "(this side exposes no memory for remote access){}",
                       describe, adapter);
}

Result<int> Endpoint::take_completions(const std::function<Status(const ibv_wc&)>& on_wc, bool& flushed) {
    ibv_wc wc[32];
    int n = ibv_poll_cq(cq.get(), 32, wc);
    if (n < 0) return Error("ibv_poll_cq failed");
    int n_real = n;  // a probe's completion is no progress
    for (int i = 0; i < n; ++i) {
        // A flushed request means tear-down has begun; the ones before it still count (the
        // peer's last message may sit just before the flush), so keep going and decide later.
        if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
            flushed = true;
            continue;
        }
        if (wc[i].wr_id == kProbeWrId) {  // answered (the peer lives), or its failure says why not
            probe_posted = false;
            --n_real;
            if (wc[i].status == IBV_WC_SUCCESS) continue;
        }
        if (wc[i].status != IBV_WC_SUCCESS) {
            // The transport's retries ran out: the peer's adapter stopped answering (a link
            // down), unlike a request it refused; SoftRoCE errs its queue pairs so (a local QP
            // operation error) when its network device goes down.
            if (wc[i].status == IBV_WC_RETRY_EXC_ERR || wc[i].status == IBV_WC_RNR_RETRY_EXC_ERR ||
                wc[i].status == IBV_WC_LOC_QP_OP_ERR)
                link_lost = true;
            return Error(fmt::format("{}: a work request failed: {} (vendor error {:#x})", describe,
                                     ibv_wc_status_str(wc[i].status), wc[i].vendor_err));
        }
        if (auto s = on_wc(wc[i]); !s) return s.error();
    }
    return n_real;
}

void Endpoint::probe() {
    if (probe_posted || qp.get() == nullptr) return;
    ibv_send_wr wr{};
    wr.wr_id = kProbeWrId;
    wr.opcode = IBV_WR_RDMA_WRITE;  // zero bytes: no sge, and no rkey is checked
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(qp.get(), &wr, &bad) == 0) probe_posted = true;  // a QP that cannot post fails elsewhere
}

Status Endpoint::progress(const std::function<Status(const ibv_wc&)>& on_wc, const std::function<bool()>& done,
                          int timeout_ms) {
    if (timeout_ms < 0) timeout_ms = io_timeout_ms;
    bool flushed = false;
    auto active = std::chrono::steady_clock::now();  // the last completion or event that was progress
    while (!done()) {
        auto n = take_completions(on_wc, flushed);
        if (!n) return n.error();
        if (*n > 0) {
            active = std::chrono::steady_clock::now();
            continue;
        }
        if (flushed) return Error(flush_reason());
        // Gone (disconnected, or its device removed): what had arrived is taken; nothing more will.
        if (device_removed) return Error(fmt::format("{}: its RDMA device was removed", describe));
        if (disconnected) return Error(fmt::format("{}: disconnected", describe));  // link_lost says whose doing
        auto idle = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - active).count();
        if (idle >= timeout_ms) {
            link_lost = true;
            return Error(fmt::format("{} was silent for {} ms: the peer is gone or stuck (x-io-timeout)", describe, timeout_ms));
        }
        if (idle >= kProbeAfterMs) probe();
        int64_t until = idle < kProbeAfterMs ? std::min<int64_t>(kProbeAfterMs, timeout_ms) : timeout_ms;  // the next look
        int wait = static_cast<int>(until - idle);
        pollfd fds[3] = {{channel->fd, POLLIN, 0}, {events->fd, POLLIN, 0}, {cancel_fd, POLLIN, 0}};
        int r = ::poll(fds, 3, wait);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return verbs_error("poll");
        if (fds[2].revents != 0) return Error("migration cancelled");
        if (r == 0) continue;  // a probe's time, or the silence's end: above
        if (fds[0].revents != 0) {
            if (auto s = rearm_cq(channel.get(), cq.get()); !s) return s;
            continue;  // completions first: a disconnect may follow the peer's last message closely
        }
        if (fds[1].revents != 0) {
            // The CQ may have filled since it was last polled: what the peer said before it
            // disconnected is taken before the disconnect is.
            auto late = take_completions(on_wc, flushed);
            if (!late) return late.error();
            if (*late > 0 || flushed) continue;
            if (auto s = cm_event_while_busy(); !s) return s;
        }
    }
    return {};
}

Status Endpoint::reap(const std::function<Status(const ibv_wc&)>& on_wc) {
    bool flushed = false;
    auto n = take_completions(on_wc, flushed);
    if (!n) return n.error();
    if (flushed) return Error(flush_reason());
    return {};
}

Result<std::unique_ptr<Endpoint>> connect_endpoint(const std::string& host, uint16_t port, const PrivateData& ours,
                                                   int cancel_fd, Timeouts t, const BeforeConnect& before_connect,
                                                   ibv_pd* shared_pd, QpShape shape) {
    std::string name = fmt::format("rdma destination {}:{}", host, port);
    if (ours.channels > 1) name += fmt::format(" (channel {})", ours.channel);
    std::vector<TimedStep> steps;
    StepClock clock(steps);
    auto made = new_endpoint(cancel_fd, t, name, &Endpoint::id);
    if (!made) return made.error();
    auto e = std::move(*made);
    auto step = [&](const char* part, const char* done) {  // where a connection's setup time goes
        clock.mark(part);
        trace("{}: {} after {} ms", name, done, clock.ms_so_far());
    };
    step("cm-id", "rdma_cm id created (the first one in a process loads librdmacm's device list)");
    auto ai = resolve(host, port, false);
    if (!ai) return ai.error();
    // An address no RDMA device reaches fails here (127.0.0.1 on most machines).
    std::string reach = fmt::format("is {} an address of an RDMA interface, or routed through one (rdma link show; "
                                    "ip route get {})?", host, host);
    auto unreachable = [&](const Error& err) { return Error(err.message() + "; " + reach); };
    if (rdma_resolve_addr(e->id.get(), nullptr, (*ai)->ai_addr, t.connect_ms) != 0)
        return Error::from_errno("rdma_resolve_addr " + host, errno, reach);
    if (auto s = wait_cm(*e, RDMA_CM_EVENT_ADDR_RESOLVED, t.connect_ms, "resolving the RDMA address"); !s) return unreachable(s.error());
    step("address", "address resolved");
    if (rdma_resolve_route(e->id.get(), t.connect_ms) != 0) return Error::from_errno("rdma_resolve_route " + host, errno, reach);
    if (auto s = wait_cm(*e, RDMA_CM_EVENT_ROUTE_RESOLVED, t.connect_ms, "resolving the RDMA route"); !s) return unreachable(s.error());
    step("route", "route resolved");
    if (auto s = create_resources(*e, shared_pd, shape); !s) return s.error();
    step("queue-pair", "protection domain, completion queue and queue pair made");
    if (auto s = before_connect(*e); !s) return s.error();
    step("buffers", "control buffers registered and receives posted");
    // The postcopy channel's source serves the destination's READs (x-rdma-postcopy-read).
    if (shape.split) {
        e->reads_taken = read_depth(e->id->verbs, false, kPcReadsAtOnce);
        trace("{}: takes {} READs at once", name, e->reads_taken);
    }
    auto pd = encode_private_data(ours);
    auto param = conn_param(pd, *e);
    if (rdma_connect(e->id.get(), &param) != 0) return verbs_error("rdma_connect");
    if (auto s = wait_cm(*e, RDMA_CM_EVENT_ESTABLISHED, t.connect_ms, fmt::format("connecting to {}:{}", host, port).c_str(), &e->peer); !s) {
        return s.error();
    }
    step("connection", "connected");
    e->steps = std::move(steps);
    return e;
}

Result<std::unique_ptr<Endpoint>> listen_endpoint(const std::string& host, uint16_t port, int cancel_fd, Timeouts t) {
    auto made = new_endpoint(cancel_fd, t, fmt::format("rdma:{}:{}", host, port), &Endpoint::listen_id);
    if (!made) return made.error();
    auto e = std::move(*made);
    auto ai = resolve(host, port, true);
    if (!ai) return ai.error();
    if (rdma_bind_addr(e->listen_id.get(), (*ai)->ai_addr) != 0) {
        return Error::from_errno(fmt::format("rdma_bind_addr {}:{}", host, port), errno,
                                 "is an RDMA device configured with that address (rdma link show)?");
    }
    if (rdma_listen(e->listen_id.get(), 1) != 0) return verbs_error("rdma_listen");
    return e;
}

namespace {

// The next connection request on `on`'s event channel. `check` may turn it down: the request
// is then rejected with the reason and its id destroyed.
Result<rdma_cm_id*> next_request(Endpoint& on, int timeout_ms, const std::string& what, PrivateData& theirs,
                                 const std::function<Status(const PrivateData&)>& check, uint8_t* peer_reads = nullptr) {
    rdma_cm_id* raw = nullptr;
    auto s = wait_cm(on, RDMA_CM_EVENT_CONNECT_REQUEST, timeout_ms, what.c_str(), &theirs, &raw, peer_reads);
    if (s) s = check(theirs);
    if (!s) {
        if (raw != nullptr) refuse(raw, s.error().message());
        return s.error();
    }
    return raw;
}

// An endpoint for an accepted request, inheriting `from`'s cancel fd and timeout.
std::unique_ptr<Endpoint> accepted(rdma_cm_id* raw, const Endpoint& from, std::string describe, const PrivateData& theirs) {
    auto e = std::make_unique<Endpoint>();
    e->id.reset(raw);
    e->cancel_fd = from.cancel_fd;
    e->io_timeout_ms = from.io_timeout_ms;
    e->describe = std::move(describe);
    e->peer = theirs;
    e->grants_remote_write = true;
    return e;
}

// Accepts with `ours` as private data and waits for ESTABLISHED on `events_of`'s channel, as
// long as x-io-timeout allows (the source has asked: its answer is the peer's next word).
Status answer(Endpoint& e, Endpoint& events_of, const PrivateData& ours, const char* what) {
    auto pd = encode_private_data(ours);
    auto param = conn_param(pd, e);
    if (rdma_accept(e.id.get(), &param) != 0) return verbs_error(fmt::format("rdma_accept ({})", what));
    return wait_cm(events_of, RDMA_CM_EVENT_ESTABLISHED, e.io_timeout_ms, what);
}

}  // namespace

Result<std::unique_ptr<Endpoint>> accept_endpoint(Endpoint& listener, uint32_t supported, const BeforeConnect& before_connect,
                                                  const Admit& admit, int wait_ms) {
    PrivateData theirs;
    auto raw = next_request(listener, wait_ms, "waiting for the RDMA migration source", theirs,
                            [&admit](const PrivateData& p) { return admit ? admit(p) : Status{}; });
    if (!raw) return raw.error();
    auto e = accepted(*raw, listener, "the rdma migration source", theirs);
    StepClock clock(e->steps);  // from the source's request on
    e->events = std::move(listener.events);  // the accepted id reports its events on the listener's channel
    e->listen_id = std::move(listener.listen_id);
    // A connection that is not made leaves the listener as it was, listening: the source gave
    // up on its request (a request taken late, after the source's wait ended, cannot even have
    // its queue pair made), or the network lost the answer (a flap). Its next request may work,
    // unless the device went or vmm is ending.
    auto not_made = [&](const Error& err) {
        bool went = e->device_removed || err.sys_errno() == ECANCELED;
        e->give_back_listener(listener);
        return went ? err : Error::with_errno(err.message(), ECONNABORTED);
    };
    if (listener.ahead && listener.ahead->pd()->context == e->id->verbs) e->ahead = listener.ahead;
    if (auto r = create_resources(*e, nullptr, {}); !r) return not_made(r.error());
    clock.mark("queue-pair");
    if (auto r = before_connect(*e); !r) return not_made(r.error());
    clock.mark("buffers");
    PrivateData ours = theirs;
    ours.flags = theirs.flags & supported;  // the spec: answer with what this side supports
    if (auto r = answer(*e, *e, ours, "accepting the RDMA connection"); !r) return not_made(r.error());
    clock.mark("connection");
    return e;
}

Result<std::unique_ptr<Endpoint>> accept_channel(Endpoint& primary, uint32_t index, QpShape shape) {
    const PrivateData& first = primary.peer;
    std::string what = fmt::format("waiting for RDMA channel {} of {}", index, first.channels);
    PrivateData theirs;
    uint8_t peer_reads = 1;
    auto raw = next_request(primary, primary.io_timeout_ms, what, theirs, [&](const PrivateData& t) -> Status {
        if (t.session == first.session && t.channel == index && t.channels == first.channels &&
            t.chunk_shift == first.chunk_shift)
            return {};
        return Error(fmt::format("{}: a request for channel {} of {} of another migration (session {:#x}, expected {:#x})",
                                 what, t.channel, t.channels, t.session, first.session));
    }, &peer_reads);
    if (!raw) return raw.error();
    auto e = accepted(*raw, primary, fmt::format("{} (channel {})", primary.describe, index), theirs);
    if (auto r = create_resources(*e, primary.protection_domain(), shape); !r) return r.error();
    // The postcopy channel's destination issues READs (x-rdma-postcopy-read): as many at once as
    // its adapter and the source's take.
    if (shape.split) {
        e->reads_issued = read_depth(e->id->verbs, true, std::min(kPcReadsAtOnce, peer_reads));
        trace("{}: {} READs at once (the source takes {})", e->describe, e->reads_issued, peer_reads);
    }
    PrivateData ours = theirs;
    ours.flags = theirs.flags & first.flags;  // what channel 0 agreed
    if (auto r = answer(*e, primary, ours, "accepting an RDMA channel"); !r) return r.error();
    return e;
}

}  // namespace rdma_migrate

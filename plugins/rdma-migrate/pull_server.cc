// PullServer (pull_server.h).
#include "pull_server.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "cm.h"
#include "trace.h"
#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"
#include "vmm/common/units.h"

namespace rdma_migrate {

namespace {

constexpr uint32_t kReceives = 4;   // a client's messages that may wait at once
constexpr size_t kBufferSize = 64;  // each receive buffer, and the OFFER's after them
constexpr int kCqDepth = static_cast<int>(PullServer::kMaxClients * (kReceives + 2));

uint64_t wr_id(uint32_t index, uint32_t slot) { return (uint64_t{index} << 8) | slot; }

// "10.0.0.2:41234" for a connection's peer.
std::string peer_of(rdma_cm_id* id) {
    sockaddr* sa = rdma_get_peer_addr(id);
    char host[INET6_ADDRSTRLEN] = "?";
    uint16_t port = 0;
    if (sa != nullptr && sa->sa_family == AF_INET) {
        auto* in = reinterpret_cast<sockaddr_in*>(sa);
        ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
    } else if (sa != nullptr && sa->sa_family == AF_INET6) {
        auto* in = reinterpret_cast<sockaddr_in6*>(sa);
        ::inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof host);
        return fmt::format("[{}]:{}", host, ntohs(in->sin6_port));
    }
    return fmt::format("{}:{}", host, port);
}

}  // namespace

// One client's connection: its id, its message buffers and its queue pair (destroyed first).
struct PullServer::Conn {
    uint32_t index = 0;  // in clients_
    CmId id;
    vmm::Mapping buffers;  // kReceives receive buffers, then the OFFER
    MemoryRegion mr;
    QueuePair qp;
    bool ended = false;
    uint8_t* buffer(uint32_t slot) const { return buffers.data() + slot * kBufferSize; }
};

Result<std::unique_ptr<PullServer>> PullServer::start(const std::string& host, uint16_t port, const void* base,
                                                      uint64_t length, Timeouts t) {
    if (length == 0 || length > kPullMaxLength) return Error(fmt::format("rdma-pull: cannot serve {} bytes", length));
    std::unique_ptr<PullServer> s(new PullServer());
    s->base_ = static_cast<const uint8_t*>(base);
    s->length_ = length;
    s->timeouts_ = t;
    s->describe_ = fmt::format("rdma-pull server {}:{}", host, port);
    auto ec = make_event_channel();
    if (!ec) return ec.error();
    s->events_ = std::move(*ec);
    rdma_cm_id* raw = nullptr;
    if (rdma_create_id(s->events_.get(), &raw, nullptr, RDMA_PS_TCP) != 0) return verbs_error("rdma_create_id");
    s->listen_id_.reset(raw);
    auto ai = resolve(host, port, true);
    if (!ai) return ai.error();
    if (rdma_bind_addr(raw, (*ai)->ai_addr) != 0) {
        return Error::from_errno(fmt::format("rdma_bind_addr {}:{}", host, port), errno,
                                 "is an RDMA device configured with that address (rdma link show)?");
    }
    // Bound to a device's address: the save is registered now, so that no clone waits for it.
    if (raw->verbs != nullptr)
        if (auto d = s->device(raw->verbs); !d) return d.error();
    if (rdma_listen(raw, static_cast<int>(kMaxClients)) != 0) return verbs_error("rdma_listen");
    s->stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!s->stop_) return verbs_error("eventfd");
    PullServer* p = s.get();
    s->thread_ = std::thread([p] { p->run(); });
    return s;
}

PullServer::~PullServer() {
    if (thread_.joinable()) {
        uint64_t one = 1;
        (void)!::write(stop_.get(), &one, sizeof one);
        thread_.join();
    }
    for (auto& [id, c] : conns_)
        if (!c->ended) rdma_disconnect(id);
    conns_.clear();  // their queue pairs, buffers and ids, before what they share
}

uint32_t PullServer::rkey() const { return served_ ? served_->rkey : 0; }

std::vector<PullServer::Client> PullServer::clients() const {
    std::lock_guard lock(mutex_);
    std::vector<Client> out = clients_;
    auto now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < out.size(); ++i) {
        if (out[i].state == Client::State::pulling) {
            out[i].ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(now - since_[i]).count());
        }
    }
    return out;
}

Status PullServer::device(ibv_context* ctx) {
    if (pd_) {
        if (pd_->context == ctx) return {};
        return Error("the client reached this server through another RDMA device than the first: serve on one "
                     "device's address");
    }
    ProtectionDomain pd(ibv_alloc_pd(ctx));
    if (!pd) return verbs_error("ibv_alloc_pd");
    if (auto s = make_cq(ctx, kCqDepth, channel_, cq_); !s) return s;
    auto mr = MemoryRegistry(pd.get()).register_memory(const_cast<uint8_t*>(base_), length_, Use::pull_served,
                                                       fmt::format("the served save ({})", vmm::format_size(length_)));
    if (!mr) return mr.error();
    served_ = std::move(*mr);
    pd_ = std::move(pd);
    reads_ = read_depth(ctx, false, kPcReadsAtOnce);
    trace("{}: {} registered for remote read (rkey {:#x}), {} READs at once", describe_, vmm::format_size(length_),
          served_->rkey, reads_);
    return {};
}

void PullServer::run() {
    vmm::name_this_thread("rdma-pull-serve");
    for (;;) {
        pollfd fds[3] = {{stop_.get(), POLLIN, 0}, {events_->fd, POLLIN, 0}, {channel_ ? channel_->fd : -1, POLLIN, 0}};
        int r = ::poll(fds, 3, -1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 || fds[0].revents != 0) return;
        if (fds[1].revents != 0)
            while (auto ev = rdma_migrate::take_cm_event(events_.get())) take_cm_event(*ev);
        if (channel_ && fds[2].revents != 0) {
            if (auto s = rearm_cq(channel_.get(), cq_.get()); !s) {
                vmm::log::warn("{}: {}; no longer serving", describe_, s.error().message());
                return;
            }
            take_completions();
        }
    }
}

void PullServer::take_cm_event(const CmEvent& ev) {
    trace("{}: cm event {} (status {})", describe_, rdma_event_str(ev.type), ev.status);
    if (ev.type == RDMA_CM_EVENT_CONNECT_REQUEST) {
        uint32_t index = 0;
        if (auto s = accept(ev.id, ev, index); !s) vmm::log::warn("{}: refused a client: {}", describe_, s.error().message());
        return;
    }
    if (ev.type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
        vmm::log::warn("{}: the RDMA device was removed: the clones pulling from here fail", describe_);
        for (auto& [id, c] : conns_) end(*c, Client::State::gone, "the server's RDMA device was removed");
        return;
    }
    Conn* c = find(ev.id);
    if (c == nullptr) return;
    if (ev.type == RDMA_CM_EVENT_ESTABLISHED) {
        if (auto s = offer(*c); !s) end(*c, Client::State::gone, s.error().message());
        return;
    }
    if (ev.type == RDMA_CM_EVENT_DISCONNECTED || ev.type == RDMA_CM_EVENT_UNREACHABLE ||
        ev.type == RDMA_CM_EVENT_CONNECT_ERROR || ev.type == RDMA_CM_EVENT_REJECTED) {
        // What it sent before it hung up (its DONE) is in the CQ already: taken first.
        if (cq_) take_completions();
        if (!c->ended) end(*c, Client::State::gone, fmt::format("its connection ended ({}) before it said it was done",
                                                                rdma_event_str(ev.type)));
        forget(ev.id);
    }
}

// A connection request: a pull (kCapPull) while there is room, on the device the save is
// registered on; its queue pair takes READs, and its receives wait for the client's messages.
// Until the Conn owns `raw`, a failure refuses it (refuse() destroys it).
Status PullServer::accept(rdma_cm_id* raw, const CmEvent& ev, uint32_t& index) {
    auto theirs = decode_private_data(ev.private_data);
    Status why = theirs ? Status{} : Status(theirs.error());
    if (why && (theirs->flags & kCapPull) == 0) {
        why = Error("this is an rdma-pull server (x-pull-serve): a migration goes to a vmm --incoming rdma:HOST:PORT");
    }
    size_t live = std::count_if(conns_.begin(), conns_.end(), [](const auto& kv) { return !kv.second->ended; });
    if (why && live >= kMaxClients) why = Error(fmt::format("{} clones pull from this server already", kMaxClients));
    if (why) why = device(raw->verbs);
    if (!why) {
        refuse(raw, why.error().message());
        return why;
    }
    auto c = std::make_unique<Conn>();
    c->id.reset(raw);
    auto buffers = vmm::Mapping::map("the pull server's buffers", 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    if (!buffers) return buffers.error();
    c->buffers = std::move(*buffers);
    auto mr = MemoryRegistry(pd_.get()).register_memory(c->buffers.data(), c->buffers.size(), Use::control_receive,
                                                        "the pull server's buffers");
    if (!mr) return mr.error();
    c->mr = std::move(*mr);
    ibv_qp_init_attr attr{};
    attr.send_cq = attr.recv_cq = cq_.get();
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = 4;
    attr.cap.max_recv_wr = kReceives;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    if (rdma_create_qp(raw, pd_.get(), &attr) != 0) return verbs_error("rdma_create_qp (pull)");
    c->qp = QueuePair(raw);
    {
        std::lock_guard lock(mutex_);
        c->index = index = static_cast<uint32_t>(clients_.size());
        clients_.push_back({peer_of(raw), 0, 0, Client::State::pulling, ""});
        since_.push_back(std::chrono::steady_clock::now());
    }
    Conn& conn = *c;
    conns_[raw] = std::move(c);
    auto fail = [&](const Error& e) {
        end(conn, Client::State::gone, e.message());
        forget(raw);
        return Status(e);
    };
    for (uint32_t i = 0; i < kReceives; ++i)
        if (auto s = post_receive(conn, i); !s) return fail(s.error());
    auto ours = encode_private_data({kProtocolVersion, kCapPull});
    rdma_conn_param p{};
    p.private_data = ours.data();
    p.private_data_len = static_cast<uint8_t>(ours.size());
    p.responder_resources = reads_;
    p.initiator_depth = 1;
    p.retry_count = 7;
    p.rnr_retry_count = 7;
    if (rdma_accept(raw, &p) != 0) return fail(verbs_error("rdma_accept (pull)"));
    vmm::log::info("{}: a clone pulls from {}", describe_, peer_of(raw));
    return {};
}

Status PullServer::post_receive(Conn& c, uint32_t slot) {
    return post_one_receive(c.qp.get(), wr_id(c.index, slot), c.buffer(slot), static_cast<uint32_t>(kBufferSize), c.mr->lkey,
                            "ibv_post_recv (pull)");
}

// The OFFER: what to read and how, once the connection is made.
Status PullServer::offer(Conn& c) {
    PullMessage m;
    m.type = PullType::offer;
    m.length = length_;
    m.address = address();
    m.rkey = served_->rkey;
    m.reads = reads_;
    auto bytes = encode_pull_message(m);
    std::memcpy(c.buffer(kReceives), bytes.data(), bytes.size());
    return post_one_send(c.qp.get(), wr_id(c.index, kReceives), IBV_WR_SEND, c.buffer(kReceives),
                         static_cast<uint32_t>(bytes.size()), c.mr->lkey, "ibv_post_send (pull offer)");
}

void PullServer::take_completions() {
    ibv_wc wcs[16];
    int n = 0;
    while ((n = ibv_poll_cq(cq_.get(), 16, wcs)) > 0) {
        for (int i = 0; i < n; ++i) {
            const ibv_wc& wc = wcs[i];
            auto index = static_cast<uint32_t>(wc.wr_id >> 8);
            auto it = std::find_if(conns_.begin(), conns_.end(), [&](const auto& kv) { return kv.second->index == index; });
            if (it == conns_.end() || it->second->ended) continue;  // flushed as it ended
            Conn& c = *it->second;
            if (wc.status != IBV_WC_SUCCESS) {
                end(c, Client::State::gone, fmt::format("its queue pair failed: {}", ibv_wc_status_str(wc.status)));
            } else if (wc.opcode == IBV_WC_RECV) {
                if (auto s = take_message(c, wc); !s) end(c, Client::State::gone, s.error().message());
            }
        }
    }
}

Status PullServer::take_message(Conn& c, const ibv_wc& wc) {
    auto slot = static_cast<uint32_t>(wc.wr_id & 0xff);
    if (slot >= kReceives) return Error("rdma-pull: a receive completion for no receive buffer");
    auto m = decode_pull_message({c.buffer(slot), std::min<size_t>(wc.byte_len, kBufferSize)});
    if (!m) return m.error();
    if (m->type == PullType::offer) return Error("rdma-pull: a client sent an OFFER (only a server does)");
    {
        std::lock_guard lock(mutex_);
        Client& rec = clients_[c.index];
        if (m->bytes < rec.pulled) {
            return Error(fmt::format("rdma-pull: a client said it has read {} bytes, after {}", m->bytes, rec.pulled));
        }
        rec.pulled = m->bytes;
    }
    if (m->type == PullType::done) {
        end(c, Client::State::done, "");
        return {};
    }
    return post_receive(c, slot);
}

void PullServer::end(Conn& c, Client::State state, const std::string& why) {
    if (c.ended) return;
    c.ended = true;
    uint64_t pulled = 0;
    std::string peer;
    {
        std::lock_guard lock(mutex_);
        Client& rec = clients_[c.index];
        rec.state = state;
        rec.why = why;
        rec.ms = static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since_[c.index]).count());
        pulled = rec.pulled;
        peer = rec.peer;
    }
    if (state == Client::State::done) {
        vmm::log::info("{}: {} is done: it read {}", describe_, peer, vmm::format_size(pulled));
    } else {
        vmm::log::warn("{}: {} cut off after {} read: {}", describe_, peer, vmm::format_size(pulled), why);
    }
    rdma_disconnect(c.id.get());
}

PullServer::Conn* PullServer::find(rdma_cm_id* id) {
    auto it = conns_.find(id);
    return it == conns_.end() ? nullptr : it->second.get();
}

void PullServer::forget(rdma_cm_id* id) { conns_.erase(id); }

}  // namespace rdma_migrate

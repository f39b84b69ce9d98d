// RAII owners for every rdma_cm and ibverbs object the plugin creates. Each is a unique_ptr
// whose deleter calls the matching destroy function; owners are declared parent-first so they
// unwind in reverse. Deleters never throw and ignore failures (there is nothing left to do).
//
// errno discipline (rdma-core man pages): ibv_reg_mr, ibv_create_* and rdma_create_* return
// NULL or -1 and set errno; ibv_post_send/recv, ibv_modify_qp and ibv_req_notify_cq *return*
// the error number. verbs_error() and posted() read each the right way.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <memory>
#include <string>

#include "proto/wire.h"

namespace rdma_migrate {

template <auto Destroy>
struct Deleter {
    template <typename T>
    void operator()(T* p) const noexcept {
        if (p != nullptr) (void)Destroy(p);
    }
};

using EventChannel = std::unique_ptr<rdma_event_channel, Deleter<rdma_destroy_event_channel>>;
using CmId = std::unique_ptr<rdma_cm_id, Deleter<rdma_destroy_id>>;
using ProtectionDomain = std::unique_ptr<ibv_pd, Deleter<ibv_dealloc_pd>>;
using CompletionChannel = std::unique_ptr<ibv_comp_channel, Deleter<ibv_destroy_comp_channel>>;
using CompletionQueue = std::unique_ptr<ibv_cq, Deleter<ibv_destroy_cq>>;
using MemoryRegion = std::unique_ptr<ibv_mr, Deleter<ibv_dereg_mr>>;

// The QP an rdma_cm_id owns (rdma_create_qp / rdma_destroy_qp).
class QueuePair {
public:
    QueuePair() = default;
    explicit QueuePair(rdma_cm_id* id) : id_(id) {}
    QueuePair(QueuePair&& o) noexcept : id_(std::exchange(o.id_, nullptr)) {}
    QueuePair& operator=(QueuePair&& o) noexcept {
        reset();
        id_ = std::exchange(o.id_, nullptr);
        return *this;
    }
    ~QueuePair() { reset(); }
    ibv_qp* get() const { return id_ != nullptr ? id_->qp : nullptr; }
    void reset() {
        if (id_ != nullptr && id_->qp != nullptr) rdma_destroy_qp(id_);
        id_ = nullptr;
    }

private:
    rdma_cm_id* id_ = nullptr;
};

// "<what>: <strerror(errno)>" for calls that set errno.
inline Error verbs_error(const std::string& what, int err = errno) { return Error::from_errno(what, err); }
// For calls that return their error number.
inline Status posted(int rc, const char* what) {
    if (rc != 0) return Error::from_errno(what, rc);
    return {};
}

// One receive of `len` bytes into `buf` (registered with `lkey`), and one signalled send-side
// work request (`op`: SEND, or an RDMA READ/WRITE at remote (addr, rkey)).
inline Status post_one_receive(ibv_qp* qp, uint64_t wr_id, void* buf, uint32_t len, uint32_t lkey, const char* what) {
    ibv_sge sge{reinterpret_cast<uint64_t>(buf), len, lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return posted(ibv_post_recv(qp, &wr, &bad), what);
}
inline Status post_one_send(ibv_qp* qp, uint64_t wr_id, ibv_wr_opcode op, const void* buf, uint32_t len, uint32_t lkey,
                            const char* what, uint64_t addr = 0, uint32_t rkey = 0) {
    ibv_sge sge{reinterpret_cast<uint64_t>(buf), len, lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    return posted(ibv_post_send(qp, &wr, &bad), what);
}

// The completion channel's fd is readable: takes its event (if another thread took it first,
// nothing), acknowledges it and arms `cq` for the next. What completed before the arming is in
// the CQ, so the caller polls it before it waits again. Every CQ wait in the plugin ends here.
inline Status rearm_cq(ibv_comp_channel* channel, ibv_cq* cq) {
    ibv_cq* ev_cq = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(channel, &ev_cq, &ctx) != 0) return {};
    ibv_ack_cq_events(ev_cq, 1);
    return posted(ibv_req_notify_cq(cq, 0), "ibv_req_notify_cq");
}

}  // namespace rdma_migrate

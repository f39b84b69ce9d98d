// What both halves of the postcopy channel share: the wait on one of its CQs, the message
// buffers, and the check of a page range against this side's blocks.
#include "postcopy_channel.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>

namespace rdma_migrate {

namespace {

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left > 0 ? static_cast<int>(left) : 0;
}

Error failed_completion(const Endpoint& ep, const ibv_wc& wc) {
    if (wc.status == IBV_WC_WR_FLUSH_ERR) {
        return Error(fmt::format("{}: the postcopy channel was torn down (the peer hung up, or the link failed)", ep.describe));
    }
    return Error(fmt::format("{}: a postcopy work request failed: {} (vendor error {:#x})", ep.describe,
                             ibv_wc_status_str(wc.status), wc.vendor_err));
}

}  // namespace

Result<bool> take_completions(Endpoint& ep, bool receives, const std::function<Status(const ibv_wc&)>& on_wc,
                              const std::function<bool()>& done) {
    ibv_cq* cq = receives ? ep.recv_cq.get() : ep.cq.get();
    if (cq == nullptr) return Error("internal: the postcopy channel has no split CQ");
    while (!done()) {
        ibv_wc wc{};
        int n = ibv_poll_cq(cq, 1, &wc);  // one at a time: a caller may stop after any of them
        if (n < 0) return Error(fmt::format("{}: ibv_poll_cq failed", ep.describe));
        if (n == 0) return false;
        if (wc.status != IBV_WC_SUCCESS) return failed_completion(ep, wc);
        if (auto s = on_wc(wc); !s) return s.error();
    }
    return true;
}

Result<bool> await_cq_event(Endpoint& ep, bool receives, std::chrono::steady_clock::time_point deadline) {
    ibv_cq* cq = receives ? ep.recv_cq.get() : ep.cq.get();
    ibv_comp_channel* channel = receives ? ep.recv_channel.get() : ep.channel.get();
    if (cq == nullptr || channel == nullptr) return Error("internal: the postcopy channel has no split CQ");
    for (;;) {
        int left = ms_left(deadline);
        if (left == 0) return false;
        pollfd fds[2] = {{channel->fd, POLLIN, 0}, {ep.cancel_fd, POLLIN, 0}};
        int r = ::poll(fds, 2, left);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return verbs_error("poll");
        if (fds[1].revents != 0) return Error("migration cancelled");
        if (fds[0].revents == 0) continue;
        if (auto s = rearm_cq(channel, cq); !s) return s.error();
        return true;  // armed again: the caller takes what completed before it waits again
    }
}

// `wake_fd` (an eventfd, or -1): a readable one ends the wait too, drained, as a completion would.
Result<bool> await_either_cq(Endpoint& ep, std::chrono::steady_clock::time_point deadline, int wake_fd) {
    if (!ep.recv_cq || !ep.cq) return Error("internal: the postcopy channel has no split CQ");
    for (;;) {
        int left = ms_left(deadline);
        if (left == 0) return false;
        pollfd fds[4] = {{ep.recv_channel->fd, POLLIN, 0}, {ep.channel->fd, POLLIN, 0}, {ep.cancel_fd, POLLIN, 0},
                         {wake_fd, POLLIN, 0}};
        int r = ::poll(fds, 4, left);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return verbs_error("poll");
        if (fds[2].revents != 0) return Error("migration cancelled");
        if (fds[3].revents != 0) {
            uint64_t n = 0;
            (void)::read(wake_fd, &n, sizeof n);
            return true;
        }
        if (fds[0].revents == 0 && fds[1].revents == 0) continue;
        if (fds[0].revents != 0)
            if (auto s = rearm_cq(ep.recv_channel.get(), ep.recv_cq.get()); !s) return s.error();
        if (fds[1].revents != 0)
            if (auto s = rearm_cq(ep.channel.get(), ep.cq.get()); !s) return s.error();
        return true;
    }
}

Error silent(const Endpoint& ep) {
    return Error(fmt::format("{} was silent for {} ms in postcopy: the peer is gone or stuck (x-io-timeout)", ep.describe,
                             ep.io_timeout_ms));
}

Result<bool> wait_cq(Endpoint& ep, bool receives, const std::function<Status(const ibv_wc&)>& on_wc,
                     const std::function<bool()>& done, int timeout_ms) {
    bool silence_fails = timeout_ms < 0;
    auto deadline = Clock::now() + std::chrono::milliseconds(silence_fails ? ep.io_timeout_ms : timeout_ms);
    for (;;) {
        auto taken = take_completions(ep, receives, on_wc, done);
        if (!taken || *taken) return taken;
        auto signalled = await_cq_event(ep, receives, deadline);
        if (!signalled) return signalled.error();
        if (!*signalled) {
            if (!silence_fails) return false;
            return silent(ep);
        }
    }
}

Status MessageBuffers::init(const MemoryRegistry& registry, size_t count, Use use, const char* what) {
    auto area = vmm::Mapping::map(what, count * kPcSealedSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    if (!area) return area.error();
    auto mr = registry.register_memory(area->data(), area->size(), use, what);
    if (!mr) return mr.error();
    area_ = std::move(*area);
    mr_ = std::move(*mr);
    count_ = count;
    return {};
}

}  // namespace rdma_migrate

// PullClient (pull_client.h).
#include "pull_client.h"

#include <sys/mman.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "cm.h"
#include "trace.h"

namespace rdma_migrate {

namespace {

constexpr uint64_t kReadWr = 1ull << 40;  // | piece
constexpr uint64_t kOfferWr = 1;
constexpr uint64_t kTellWr = 2;
// A PULLED each 32 MiB read, or each second: each wakes the server's thread once (about
// 0.5 ms of its CPU under the nested VM's TCG), so a GiB costs it some 30 wake-ups.
constexpr uint64_t kTellEvery = 32ull << 20;
constexpr auto kTellAfter = std::chrono::seconds(1);

}  // namespace

Result<std::unique_ptr<PullClient>> PullClient::open(const std::string& host, uint16_t port, int cancel_fd, Timeouts t) {
    std::unique_ptr<PullClient> c(new PullClient());
    auto area = vmm::Mapping::map("the pull's landing area", kSlots * kPiece + 4096, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS);
    if (!area) return area.error();
    c->area_ = std::move(*area);
    PullClient* self = c.get();
    auto before_connect = [self](Endpoint& e) -> Status {
        e.reads_issued = read_depth(e.id->verbs, true, kSlots);
        auto mr = e.memory().register_memory(self->area_.data(), self->area_.size(), Use::pull_landing, "the pull's landing area");
        if (!mr) return mr.error();
        self->mr_ = std::move(*mr);
        return post_one_receive(e.qp.get(), kOfferWr, self->message(0), 64, self->mr_->lkey, "ibv_post_recv (pull offer)");
    };
    PrivateData ours{kProtocolVersion, kCapPull};
    auto ep = connect_endpoint(host, port, ours, cancel_fd, t, before_connect);
    if (!ep) return ep.error().context(fmt::format("rdma-pull:{}:{}", host, port));
    c->ep_ = std::move(*ep);
    c->ep_->describe = fmt::format("rdma-pull:{}:{}", host, port);
    if ((c->ep_->peer.flags & kCapPull) == 0) {
        return Error(fmt::format("rdma-pull:{}:{} answered as an RDMA migration destination, not a server of a saved "
                                 "guest (x-pull-serve FILE rdma:HOST:PORT there serves one)",
                                 host, port));
    }
    bool offered = false;
    Status got = c->ep_->progress([&](const ibv_wc& wc) -> Status {
        if (wc.wr_id != kOfferWr || wc.opcode != IBV_WC_RECV) return Error("rdma-pull: a completion before the server's OFFER");
        auto m = decode_pull_message({c->message(0), std::min<size_t>(wc.byte_len, 64)});
        if (!m) return m.error();
        if (m->type != PullType::offer) return Error("rdma-pull: the server's first message was not an OFFER");
        c->offer_ = *m;
        offered = true;
        return {};
    }, [&] { return offered; }, t.connect_ms);
    if (!got) return got.error().context(fmt::format("rdma-pull:{}:{}: waiting for the server's offer", host, port));
    c->reads_ = std::clamp<uint32_t>(std::min<uint32_t>(c->offer_.reads, c->ep_->reads_issued), 1, kSlots);
    c->told_at_ = std::chrono::steady_clock::now();
    trace("{}: {} served, {} READs at once", c->ep_->describe, c->offer_.length, c->reads_);
    return c;
}

PullClient::~PullClient() {
    if (!ep_) return;
    std::lock_guard lock(mutex_);
    if (!ep_->disconnected && !ep_->link_lost) {
        // Best effort: the server counts a client that leaves without DONE as gone.
        auto settled = [&] { return !telling_; };
        auto ignore = [&](const ibv_wc& wc) -> Status {
            if (wc.wr_id == kTellWr) telling_ = false;
            return {};
        };
        if (ep_->progress(ignore, settled, 2000) && tell(PullType::done)) (void)ep_->progress(ignore, settled, 2000);
    }
    ep_->hang_up();
}

Status PullClient::post_read(uint64_t piece, uint64_t length, uint64_t at) {
    return post_one_send(ep_->qp.get(), kReadWr | piece, IBV_WR_RDMA_READ, slot(piece), static_cast<uint32_t>(length),
                         mr_->lkey, "ibv_post_send (pull READ)", offer_.address + at, offer_.rkey);
}

// A completion during a read: a READ's piece copied out (they complete in order), or a PULLED sent.
Status PullClient::take(const ibv_wc& wc, uint8_t* into, uint64_t length, uint64_t& copied) {
    if (wc.wr_id == kTellWr) {
        telling_ = false;
        return {};
    }
    if ((wc.wr_id & kReadWr) == 0 || wc.opcode != IBV_WC_RDMA_READ) {
        return Error(fmt::format("rdma-pull: an unexpected completion (opcode {})", static_cast<int>(wc.opcode)));
    }
    uint64_t piece = wc.wr_id & ~kReadWr;
    if (piece * kPiece != copied) return Error("rdma-pull: a READ completed out of order");
    uint64_t n = std::min(kPiece, length - copied);
    std::memcpy(into + copied, slot(piece), n);
    copied += n;
    return {};
}

Status PullClient::read(void* into, uint64_t length, uint64_t at) {
    if (at > offer_.length || length > offer_.length - at) {
        return Error(fmt::format("{}: a read of {} bytes at {} past the {} served", ep_->describe, length, at, offer_.length));
    }
    std::lock_guard lock(mutex_);
    auto* out = static_cast<uint8_t*>(into);
    uint64_t pieces = (length + kPiece - 1) / kPiece, posted_pieces = 0, copied = 0;
    while (copied < length) {
        while (posted_pieces < pieces && posted_pieces - copied / kPiece < reads_) {
            uint64_t off = posted_pieces * kPiece;
            if (auto s = post_read(posted_pieces, std::min(kPiece, length - off), at + off); !s) return s;
            ++posted_pieces;
        }
        uint64_t before = copied;
        auto s = ep_->progress([&](const ibv_wc& wc) { return take(wc, out, length, copied); },
                               [&] { return copied > before; });
        if (!s && (ep_->disconnected || ep_->link_lost || ep_->device_removed)) {
            return Error(fmt::format("{}: the server's connection ended while this clone read {} bytes at {} (it stopped "
                                     "serving, or its host or link went): the guest cannot run on without its pages ({})",
                                     ep_->describe, length, at, s.error().message()));
        }
        if (!s) return s.error().context(fmt::format("{}: reading {} bytes at {}", ep_->describe, length, at));
    }
    pulled_ += length;
    auto now = std::chrono::steady_clock::now();
    if (!telling_ && (pulled_ - told_ >= kTellEvery || now - told_at_ >= kTellAfter)) return tell(PullType::pulled);
    return {};
}

Status PullClient::tell(PullType type) {
    PullMessage m;
    m.type = type;
    m.bytes = pulled_;
    auto bytes = encode_pull_message(m);
    std::memcpy(message(1), bytes.data(), bytes.size());
    if (auto s = post_one_send(ep_->qp.get(), kTellWr, IBV_WR_SEND, message(1), static_cast<uint32_t>(bytes.size()), mr_->lkey,
                               "ibv_post_send (pull PULLED)");
        !s)
        return s;
    telling_ = true;
    told_ = pulled_;
    told_at_ = std::chrono::steady_clock::now();
    return {};
}

}  // namespace rdma_migrate

// The destination's half of the postcopy channel (postcopy_channel.h).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "postcopy_channel.h"
#include "trace.h"

namespace rdma_migrate {

namespace {
constexpr size_t kSendBuffers = 64;
constexpr uint64_t kCreditEvery = kPcPushSlots / 4;  // push slots placed before the source hears of them
}  // namespace

// Writes WITH IMMEDIATE consume a receive and land nowhere else: receives without a buffer.
Status PostcopyDestination::post_receives() {
    for (uint32_t i = 0; i < kPcRequestSlots + kPcPushSlots + 1; ++i) {
        ibv_recv_wr wr{};
        wr.wr_id = i;
        ibv_recv_wr* bad = nullptr;
        if (auto s = posted(ibv_post_recv(ep_.qp.get(), &wr, &bad), "ibv_post_recv (postcopy)"); !s) return s;
    }
    return {};
}

Status PostcopyDestination::begin() {
    uint64_t size = uint64_t{kPcRequestSlots + kPcPushSlots} * kPcSlotSize;
    auto area = vmm::Mapping::map("the postcopy landing slots", size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    if (!area) return area.error();
    auto mr = ep_.memory().register_memory(area->data(), size, Use::postcopy_landing, "the postcopy landing slots");
    if (!mr) return mr.error();
    landing_ = std::move(*area);
    landing_mr_ = std::move(*mr);
    if (keys_) {
        auto copies = vmm::Mapping::map("the postcopy slots' private copies", size, PROT_READ | PROT_WRITE,
                                        MAP_PRIVATE | MAP_ANONYMOUS);
        if (!copies) return copies.error();
        copies_ = std::move(*copies);
    }
    if (auto s = sends_.init(ep_.memory(), kSendBuffers, Use::control_send, "the postcopy send buffers"); !s) return s;
    asked_.assign(kPcRequestSlots, std::nullopt);
    PcMessage hello{PcType::hello, landing_mr_->rkey, kPcRequestSlots, kPcPushSlots,
                    reinterpret_cast<uint64_t>(landing_.data()), kPcSlotSize};
    trace("destination: postcopy channel open: {} request slots, {} push slots", kPcRequestSlots, kPcPushSlots);
    return send_message(hello);
}

// One SEND from a ring of buffers; a buffer is reused once the SEND it held has completed
// (completions come in order on one QP).
Status PostcopyDestination::send_message(const PcMessage& m) {
    std::lock_guard lock(send_mutex_);
    if (sends_posted_ - sends_done_ >= sends_.count())
        if (auto s = await_sends(sends_.count() - 1); !s) return s;
    size_t i = next_send_++ % sends_.count();
    auto bytes = keys_ ? seal_pc_message(m, keys_->messages) : encode_pc_message(m);
    std::memcpy(sends_.at(i), bytes.data(), bytes.size());
    ibv_sge sge = sends_.sge(i, static_cast<uint32_t>(bytes.size()));
    ibv_send_wr wr{};
    wr.wr_id = i;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_send_wr* bad = nullptr;
    if (auto s = posted(ibv_post_send(ep_.qp.get(), &wr, &bad), "ibv_post_send (postcopy)"); !s) return s;
    ++sends_posted_;
    return {};
}

Status PostcopyDestination::request(uint32_t block, uint64_t offset) {
    if (auto s = check_pc_range(blocks_, block, offset, 1); !s) return s;
    uint32_t slot = 0;
    {
        std::unique_lock lock(slots_mutex_);
        auto free_slot = [&] { return std::find(asked_.begin(), asked_.end(), std::nullopt) != asked_.end(); };
        if (!slots_cv_.wait_for(lock, std::chrono::milliseconds(ep_.io_timeout_ms), free_slot)) {
            return Error(fmt::format("RDMA postcopy: all {} request slots stayed taken for {} ms (x-io-timeout): the source "
                                     "answers nothing",
                                     kPcRequestSlots, ep_.io_timeout_ms));
        }
        slot = static_cast<uint32_t>(std::find(asked_.begin(), asked_.end(), std::nullopt) - asked_.begin());
        asked_[slot] = std::pair{block, offset};
    }
    PcMessage m;
    m.type = PcType::request, m.slot = slot, m.block = block, m.pages = 1, m.offset = offset;
    trace("destination: REQUEST slot {} block {} offset {:#x}", slot, block, offset);
    return send_message(m);
}

Result<PostcopyDestination::Arrival> PostcopyDestination::next() {
    std::optional<Result<Arrival>> got;
    auto r = wait_cq(ep_, true, [&](const ibv_wc& wc) {
        got = arrival(wc);
        return Status{};
    }, [&] { return got.has_value(); });
    if (!r) return r.error();
    return std::move(*got);
}

Result<PostcopyDestination::Arrival> PostcopyDestination::arrival(const ibv_wc& wc) {
    if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || (wc.wc_flags & IBV_WC_WITH_IMM) == 0) {
        return Error(fmt::format("RDMA postcopy: the source sent something other than a write with immediate (opcode {})",
                                 static_cast<int>(wc.opcode)));
    }
    ibv_recv_wr wr{};  // the receive is given back at once: the slot, not the receive, is what is held
    wr.wr_id = wc.wr_id;
    ibv_recv_wr* bad = nullptr;
    if (auto s = posted(ibv_post_recv(ep_.qp.get(), &wr, &bad), "ibv_post_recv (postcopy)"); !s) return s.error();
    auto imm = decode_pc_immediate(ntohl(wc.imm_data), kPcRequestSlots + kPcPushSlots);
    if (!imm) return imm.error();
    Arrival a;
    a.kind = imm->kind;
    if (imm->kind == PcKind::end) return a;
    a.slot = imm->slot;
    const uint8_t* slot = slot_contents(*imm);
    uint64_t at = pc_trailer_offset(*imm);
    auto t = decode_pc_trailer({slot + at, kPcSlotSize - at});
    if (!t) return t.error();
    if (t->pages != imm->pages) {
        return Error(fmt::format("RDMA postcopy: a write of {} pages whose trailer says {}", imm->pages, t->pages));
    }
    if (auto s = check_pc_range(blocks_, t->block, t->offset, t->pages); !s) return s.error();
    if (auto s = check_tag(*imm, *t, slot, at); !s) return s.error();
    a.block = t->block, a.offset = t->offset, a.pages = t->pages, a.sums = std::move(t->sums);
    a.data = imm->kind == PcKind::data ? slot : nullptr;
    if (auto s = check_answer(a); !s) return s.error();
    trace("destination: landed in slot {}: block {} offset {:#x}, {} pages{}", a.slot, a.block, a.offset, a.pages,
          a.data == nullptr ? " (zero)" : "");
    return a;
}

// Where a write's pages and trailer are read from: its slot, or on an authenticated channel the
// slot's private copy, made first, so that what the tag is checked on is what is placed, whatever
// is written into the slot afterwards.
const uint8_t* PostcopyDestination::slot_contents(const PcImmediate& imm) {
    const uint8_t* slot = landing_.data() + uint64_t{imm.slot} * kPcSlotSize;
    if (!keys_) return slot;
    uint8_t* copy = copies_.data() + uint64_t{imm.slot} * kPcSlotSize;
    std::memcpy(copy, slot, pc_trailer_offset(imm) + kPcMaxTrailerSize);
    return copy;
}

// An authenticated channel's writes carry a tag, checked in the order they land; others none.
Status PostcopyDestination::check_tag(const PcImmediate& imm, const PcTrailer& t, const uint8_t* slot, uint64_t at) {
    if (!keys_) {
        if ((t.flags & kPcTagged) == 0) return {};
        return Error("RDMA postcopy: a tagged write on a channel that is not authenticated");
    }
    return check_pc_write(keys_->writes, imm.kind, t, {slot + at, kPcSlotSize - at}, {slot, at}, blocks_[t.block].name);
}

// An answer must land in a request slot that asks for exactly that page; a push in the next
// slot of the ring.
Status PostcopyDestination::check_answer(const Arrival& a) {
    if (a.slot >= kPcRequestSlots) {
        uint64_t expected = kPcRequestSlots + consumed_ % kPcPushSlots;
        if (a.slot == expected) return {};
        return Error(fmt::format("RDMA postcopy: a push into slot {}, where the ring is at {}", a.slot, expected));
    }
    std::lock_guard lock(slots_mutex_);
    const auto& asked = asked_[a.slot];
    if (a.pages == 1 && asked && asked->first == a.block && asked->second == a.offset) return {};
    return Error(fmt::format("RDMA postcopy: an answer in request slot {} for block {} offset {:#x} ({} pages), which it "
                             "does not ask for",
                             a.slot, a.block, a.offset, a.pages));
}

// A request slot whose page came with the push is free again: the source, having sent the
// page already, never answers it.
void PostcopyDestination::free_request_slots(const Arrival& a) {
    std::lock_guard lock(slots_mutex_);
    for (auto& asked : asked_) {
        if (asked && asked->first == a.block && asked->second >= a.offset && asked->second < a.offset + a.pages * kPcPage)
            asked.reset();
    }
    slots_cv_.notify_all();
}

Status PostcopyDestination::release(const Arrival& a) {
    if (a.kind == PcKind::end) return {};
    free_request_slots(a);
    if (a.slot < kPcRequestSlots) return {};
    ++consumed_;
    if (consumed_ - credited_ < kCreditEvery) return {};
    credited_ = consumed_;
    trace("destination: CREDIT {}", consumed_);
    PcMessage m;
    m.type = PcType::credit, m.consumed = consumed_;
    return send_message(m);
}

Status PostcopyDestination::done() {
    PcMessage m;
    m.type = PcType::done;
    if (auto s = send_message(m); !s) return s;
    // DONE is delivered before the session may hang up.
    std::lock_guard lock(send_mutex_);
    return await_sends(0);
}

// Under send_mutex_: waits until at most `in_flight` SENDs are still to complete.
Status PostcopyDestination::await_sends(uint64_t in_flight) {
    auto r = wait_cq(ep_, false, [this](const ibv_wc&) {
        ++sends_done_;
        return Status{};
    }, [&] { return sends_posted_ - sends_done_ <= in_flight; });
    return r ? Status{} : Status(r.error());
}

}  // namespace rdma_migrate

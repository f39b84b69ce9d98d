// The destination's half of the postcopy channel (postcopy_channel.h).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "postcopy_channel.h"
#include "trace.h"
#include "vmm/common/log.h"

namespace rdma_migrate {

namespace {
constexpr uint64_t kReadWrId = 1ull << 32;  // a READ's work request: this, or'd with its request slot
constexpr uint64_t kTagReadWrId = 1ull << 33;  // its tags' READ (authenticated), unsignalled
constexpr size_t kSendBuffers = 64;
constexpr uint64_t kCreditEvery = kPcPushSlots / 4;  // push slots placed before the source hears of them
// HAVE: a run of pages read is told once it is this long (1 MiB), or when a READ elsewhere ends
// it, if it reached kHaveAtLeast (64 KiB): shorter runs cost the push less than the message
// costs the source's CPU.
constexpr uint32_t kHaveEvery = 256;
constexpr uint32_t kHaveAtLeast = 16;
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
    // The pull slots (kCapPostcopyReadPush) after the request and push slots: the source's
    // immediates name only those (HELLO tells it how many), READs alone land in these.
    uint64_t slots = kPcRequestSlots + kPcPushSlots + (pulls_ ? kPcPullSlots : 0);
    uint64_t size = slots * kPcSlotSize;
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
    reading_.assign(kPcRequestSlots, false);
    read_pages_.assign(kPcRequestSlots, 1);
    read_posted_at_.assign(kPcRequestSlots, {});
    wake_ = vmm::UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_) return Error::from_errno("eventfd for the postcopy receiving thread");
    if (keys_ && keys_->reads) fetch_tags_ = keys_->reads;  // a checker of the fault thread's own
    pulling_.assign(pulls_ ? kPcPullSlots : 0, std::nullopt);
    regions_.assign(blocks_.size(), {});
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
    auto slot = ask(block, offset, false);
    return slot ? Status{} : Status(slot.error());
}

// The fault thread: a READ of the page where a KEYS told where it is, else a REQUEST; the
// slot of the page's READ, when one was posted for it.
Result<std::optional<uint32_t>> PostcopyDestination::ask(uint32_t block, uint64_t offset, bool claim) {
    if (auto s = check_pc_range(blocks_, block, offset, 1); !s) return s.error();
    uint32_t slot = 0;
    {
        std::unique_lock lock(slots_mutex_);
        auto free_slot = [&] { return free_request_slot().has_value(); };
        if (!slots_cv_.wait_for(lock, std::chrono::milliseconds(ep_.io_timeout_ms), free_slot)) {
            return Error(fmt::format("RDMA postcopy: all {} request slots stayed taken for {} ms (x-io-timeout): the source "
                                     "answers nothing",
                                     kPcRequestSlots, ep_.io_timeout_ms));
        }
        if (auto from = readable(block, offset)) return read(lock, block, offset, *from, claim);
        slot = *free_request_slot();
        asked_[slot] = std::pair{block, offset};
    }
    PcMessage m;
    m.type = PcType::request, m.slot = slot, m.block = block, m.pages = 1, m.offset = offset;
    trace("destination: REQUEST slot {} block {} offset {:#x}", slot, block, offset);
    ++asks_;
    if (auto s = send_message(m); !s) return s.error();
    return std::optional<uint32_t>{};
}

// Where the source has the page at `offset` of `block` for RDMA READ, if a KEYS told it.
std::optional<PostcopyDestination::Remote> PostcopyDestination::readable(uint32_t block, uint64_t offset) {
    if (!reads_) return std::nullopt;
    std::lock_guard lock(regions_mutex_);
    const auto& in = regions_[block];
    auto it = in.upper_bound(offset);
    if (it == in.begin()) return std::nullopt;
    const PcRegion& r = std::prev(it)->second;
    if (offset - r.offset >= r.length) return std::nullopt;
    return Remote{r.address, r.rkey, r.length, r.tags, r.tag_rkey}.after((offset - r.offset) / kPcPage);
}

// Under slots_mutex_, a free slot held: a READ of the page into it, and a readahead READ of
// the pages after it into another, when one is free. A page a READ under way already brings
// is read again by none: the vCPU waits for that READ (a guest faulting on a readahead's next
// page before it lands).
Result<std::optional<uint32_t>> PostcopyDestination::read(std::unique_lock<std::mutex>& lock, uint32_t block,
                                                           uint64_t offset, const Remote& from, bool claim) {
    ++faults_read_;
    if (read_under_way(block, offset)) {
        trace("destination: block {} offset {:#x} comes with a READ under way", block, offset);
        return std::optional<uint32_t>{};
    }
    uint32_t ahead = readahead(block, offset, from);
    auto take = [&](uint64_t at, uint32_t pages) {
        uint32_t slot = *free_request_slot();  // request() waited for one; the readahead's is looked for first
        asked_[slot] = std::pair{block, at};
        reading_[slot] = true;
        read_pages_[slot] = pages;
        return slot;
    };
    uint32_t slot = take(offset, 1);
    std::optional<uint32_t> more = ahead > 0 && free_request_slot() ? std::optional(take(offset + kPcPage, ahead)) : std::nullopt;
    lock.unlock();
    trace("destination: READ into slot {}: block {} offset {:#x}{}", slot, block, offset,
          more ? fmt::format(", and {} pages after it into slot {}", ahead, *more) : "");
    if (auto s = post_read(slot, from, 1, claim); !s) return s.error();
    if (more)
        if (auto s = post_read(*more, from.after(1), ahead); !s) return s.error();
    return std::optional<uint32_t>{slot};
}

// Under slots_mutex_: the first request slot nothing asks for, if any.
std::optional<uint32_t> PostcopyDestination::free_request_slot() const {
    auto it = std::find(asked_.begin(), asked_.end(), std::nullopt);
    if (it == asked_.end()) return std::nullopt;
    return static_cast<uint32_t>(it - asked_.begin());
}

// Under slots_mutex_: whether a READ not yet handed over brings that page.
bool PostcopyDestination::read_under_way(uint32_t block, uint64_t offset) const {
    for (size_t i = 0; i < asked_.size(); ++i) {
        const auto& a = asked_[i];
        if (reading_[i] && a && a->first == block && offset >= a->second && offset < a->second + read_pages_[i] * kPcPage)
            return true;
    }
    return false;
}

// How many pages after a fault a READ brings along. A guest working through its memory in
// order faults just past what the last READs brought: each such fault reads twice as far as
// the last (up to a slot's 16 pages in all), any other none, so a sequential sweep costs a
// fault per 64 KiB, not per page, as the source's readahead does when it hears of faults.
// Inside the region told, never past it; pages already placed are left as they are.
uint32_t PostcopyDestination::readahead(uint32_t block, uint64_t offset, const Remote& from) {
    run_ = block == last_block_ && offset == last_end_ ? std::min(run_ * 2, kPcMaxPages) : 1;
    auto ahead = static_cast<uint32_t>(std::min<uint64_t>(run_ - 1, from.room / kPcPage - 1));
    last_block_ = block;
    last_end_ = offset + uint64_t{1 + ahead} * kPcPage;
    return ahead;
}

// A READ of `pages` pages into the slot; on an authenticated channel their tags are read first,
// into the slot's trailer page, by an unsignalled READ: completions come in order on one queue
// pair, so the pages' READ done means the tags' is too.
Status PostcopyDestination::post_read(uint32_t slot, const Remote& from, uint32_t pages, bool claim) {
    ibv_sge sge{landing_slot(slot), static_cast<uint32_t>(pages * kPcPage), landing_mr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = kReadWrId | slot;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = from.address;
    wr.wr.rdma.rkey = from.rkey;
    ibv_sge tag_sge{landing_slot(slot) + pages * kPcPage, static_cast<uint32_t>(pages * kPcTagSize), landing_mr_->lkey};
    ibv_send_wr tags{};
    if (keys_) {
        if (from.tags == 0) return Error("RDMA postcopy: a region with no page tags on an authenticated channel");
        tags.wr_id = kTagReadWrId | slot;
        tags.opcode = IBV_WR_RDMA_READ;
        tags.sg_list = &tag_sge;
        tags.num_sge = 1;
        tags.wr.rdma.remote_addr = from.tags;
        tags.wr.rdma.rkey = from.tag_rkey;
        tags.next = &wr;
    }
    ibv_send_wr* bad = nullptr;
    bool fault = slot < kPcRequestSlots;  // else a pull's: no vCPU waits on it
    if (fault) {
        std::lock_guard cq(cq_mutex_);
        read_posted_at_[slot] = std::chrono::steady_clock::now();
        ++reads_in_flight_;
        if (claim) fetching_ = slot;  // before it can complete: the receiving thread leaves it
    }
    std::lock_guard lock(send_mutex_);
    if (auto s = posted(ibv_post_send(ep_.qp.get(), keys_ ? &tags : &wr, &bad), "ibv_post_send (postcopy READ)"); !s) return s;
    ++(fault ? reads_posted_ : pull_reads_);
    return {};
}

// KEYS: regions of the source's RAM this side may read from now on, each inside a block.
Status PostcopyDestination::take_keys(const PcImmediate& imm, const uint8_t* slot) {
    if (!reads_) return Error("RDMA postcopy: KEYS from a source that did not agree to RDMA READ");
    auto regions = decode_pc_regions({slot, kPcSlotSize}, imm.pages, keys_.has_value());
    if (!regions) return regions.error();
    if (keys_)  // the slot's private copy: what is checked is what is kept
        if (auto s = open_pc_keys({slot, kPcSlotSize}, imm.pages * kPcTaggedRegionSize, keys_->writes); !s) return s;
    std::lock_guard lock(regions_mutex_);
    for (const PcRegion& r : *regions) {
        if (auto s = check_pc_range(blocks_, r.block, r.offset, r.length / kPcPage); !s) return s;
        if (++region_count_ > (1u << 20)) return Error("RDMA postcopy: more than a million KEYS regions");
        regions_[r.block][r.offset] = r;
        trace("destination: KEYS: block {} offset {:#x}, {} bytes readable", r.block, r.offset, r.length);
    }
    return {};
}

// Under cq_mutex_: takes what the send CQ holds (a SEND done, or a READ, kept in read_done_),
// without waiting. The first failure there is kept: every later call, on either thread, fails with it.
Status PostcopyDestination::poll_sends() {
    if (cq_failure_) return *cq_failure_;
    auto taken = take_completions(ep_, false, [this](const ibv_wc& wc) -> Status {
        if ((wc.wr_id & kTagReadWrId) != 0) return {};  // unsignalled: only a failure comes, and ends it before this
        if ((wc.wr_id & kReadWrId) == 0) {
            ++sends_done_;
            return {};
        }
        uint64_t slot = wc.wr_id & ~kReadWrId;
        bool pull = slot >= kPcRequestSlots && slot - pull_slot(0) < pulling_.size();
        if (wc.opcode != IBV_WC_RDMA_READ || (slot >= kPcRequestSlots && !pull))
            return Error("internal: a READ completion for no request or pull slot");
        read_done_.push_back(static_cast<uint32_t>(slot));
        if (pull) return {};
        --reads_in_flight_;
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - read_posted_at_[slot]).count();
        read_us_ = read_us_ == 0 ? us : read_us_ + (us - read_us_) / 8;
        return {};
    }, [] { return false; });
    cq_cv_.notify_all();
    if (taken) return {};
    cq_failure_ = taken.error();
    return taken.error();
}

// Under cq_mutex_: the first READ done that the fault thread does not await, if any.
Result<std::optional<uint32_t>> PostcopyDestination::take_sends() {
    if (auto s = poll_sends(); !s) return s.error();
    auto mine = std::find_if(read_done_.begin(), read_done_.end(), [&](uint32_t slot) { return slot != fetching_; });
    if (mine == read_done_.end()) return std::optional<uint32_t>{};
    uint32_t slot = *mine;
    read_done_.erase(mine);
    return std::optional<uint32_t>{slot};
}

Result<PostcopyDestination::Arrival> PostcopyDestination::read_arrival(uint32_t slot, PcPageTags* tags) {
    Arrival a;
    a.kind = PcKind::data, a.slot = slot;
    if (is_pull_slot(slot)) {
        const auto& p = pulling_[slot - pull_slot(0)];
        if (!p) return Error(fmt::format("internal: a READ done into pull slot {}, which reads nothing", slot));
        a.pages = p->pages, a.block = p->block, a.offset = p->offset;
    } else {
        std::lock_guard lock(slots_mutex_);
        if (!asked_[slot] || !reading_[slot]) return Error(fmt::format("internal: a READ done into request slot {}, which reads nothing", slot));
        a.pages = read_pages_[slot];
        a.block = asked_[slot]->first, a.offset = asked_[slot]->second;
    }
    a.data = landing_.data() + uint64_t{slot} * kPcSlotSize;
    trace("destination: READ into slot {} done: block {} offset {:#x}, {} pages", slot, a.block, a.offset, a.pages);
    if (!keys_) return a;
    // Authenticated: the pages and their tags into the slot's private copy, checked there, and
    // that copy is what is placed.
    uint8_t* copy = copies_.data() + uint64_t{slot} * kPcSlotSize;
    uint64_t bytes = uint64_t{a.pages} * kPcPage;
    std::memcpy(copy, a.data, bytes + a.pages * kPcTagSize);
    if (!tags) return Error("internal: a READ on an authenticated channel without its page key");
    if (auto s = tags->check(a.block, a.offset, {copy, bytes}, {copy + bytes, a.pages * kPcTagSize},
                                     blocks_[a.block].name);
        !s)
        return s.error();
    a.data = copy;
    return a;
}

// How long the receiving thread polls for a READ under way before it sleeps: twice what READs
// have been taking, at most a millisecond (none before the first READ is done).
std::chrono::microseconds PostcopyDestination::spin_budget() {
    std::lock_guard lock(cq_mutex_);
    return std::chrono::microseconds(static_cast<int64_t>(std::min(2 * read_us_, 1000.0)));
}

// kCapPostcopyRead: a READ done, a write landed (KEYS taken here), or a wait on both CQs; with
// a fault's READ under way, the CQs are polled for spin_budget() first. With kCapPostcopyReadPush
// the pieces of this side's own push are posted here too, and END waits for the last of them.
Result<PostcopyDestination::Arrival> PostcopyDestination::next_with_reads() {
    using Clock = std::chrono::steady_clock;
    auto deadline = Clock::now() + std::chrono::milliseconds(ep_.io_timeout_ms);
    Clock::time_point spin_until{};  // while a READ is under way; the epoch: not polling
    for (;;) {
        if (pulls_) {
            if (auto s = post_pulls(); !s) return s.error();
            if (end_held_ && !pulling()) {
                end_held_ = false;
                log_pulled();
                return Arrival{};  // END: every piece is placed
            }
        }
        {
            std::lock_guard lock(cq_mutex_);
            auto read = take_sends();
            if (!read) return read.error();
            if (*read) return read_arrival(**read, keys_ && keys_->reads ? &*keys_->reads : nullptr);
        }
        std::optional<Result<Arrival>> got;
        auto landed = take_completions(ep_, true, [&](const ibv_wc& wc) {
            got = arrival(wc);
            return Status{};
        }, [&] { return got.has_value(); });
        if (!landed) return landed.error();
        if (got && *got && (*got)->kind == PcKind::end && pulling()) {
            end_held_ = true;  // the source's push is done; this side's is not
            continue;
        }
        if (got && (!*got || ((*got)->kind != PcKind::keys && (*got)->kind != PcKind::pull))) return std::move(*got);
        if (got) {
            if (auto s = release(**got); !s) return s.error();  // KEYS, PULL: its slot is the ring's again
            continue;
        }
        if (reads_in_flight_ > 0) {
            if (spin_until == Clock::time_point{}) spin_until = Clock::now() + spin_budget();
            if (Clock::now() < spin_until) continue;
        }
        spin_until = {};
        // Woken by a completion, or when the pace lets the next piece go.
        auto pull_at = pulls_ ? next_pull_at() : Clock::time_point::max();
        auto signalled = await_either_cq(ep_, std::min(deadline, pull_at), wake_.get());
        if (!signalled) return signalled.error();
        if (!*signalled && Clock::now() >= deadline) return silent(ep_);
    }
}

Result<PostcopyDestination::Arrival> PostcopyDestination::next() {
    if (reads_) return next_with_reads();
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
    if (imm->kind == PcKind::keys || imm->kind == PcKind::pull) {
        if (auto s = check_answer(a); !s) return s.error();
        if (auto s = imm->kind == PcKind::keys ? take_keys(*imm, slot) : take_pulls(*imm, slot); !s) return s.error();
        return a;
    }
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
    uint64_t n = imm.kind == PcKind::keys   ? std::min<uint64_t>(kPcSlotSize, imm.pages * kPcTaggedRegionSize + kPcTagSize)
                 : imm.kind == PcKind::pull ? std::min<uint64_t>(kPcSlotSize, pc_pulls_size(imm.pages) + kPcTagSize)
                                          : pc_trailer_offset(imm) + kPcMaxTrailerSize;
    std::memcpy(copy, slot, n);
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
bool PostcopyDestination::free_request_slots(const Arrival& a) {
    std::lock_guard lock(slots_mutex_);
    if (a.slot < kPcRequestSlots && reading_[a.slot]) {
        // A READ frees its own slot only: the source, knowing nothing of it, still answers any
        // request for these pages, into the slot that asked.
        asked_[a.slot].reset();
        reading_[a.slot] = false;
        slots_cv_.notify_all();
        return true;
    }
    free_asked_locked(a.block, a.offset, a.pages);
    return false;
}

// Under slots_mutex_: requests for [offset, offset + pages) of `block` that the source will not
// answer (it sent those pages, or left them to this side's READs) are free again.
void PostcopyDestination::free_asked_locked(uint32_t block, uint64_t offset, uint64_t pages) {
    for (size_t i = 0; i < asked_.size(); ++i) {
        auto& asked = asked_[i];
        // A READ's slot is its own until that READ is done: the adapter may still write into it.
        if (reading_[i]) continue;
        if (asked && asked->first == block && asked->second >= offset && asked->second < offset + pages * kPcPage) asked.reset();
    }
    slots_cv_.notify_all();
}

void PostcopyDestination::free_asked(uint32_t block, uint64_t offset, uint64_t pages) {
    std::lock_guard lock(slots_mutex_);
    free_asked_locked(block, offset, pages);
}

// kCapPostcopyRead: pages read and placed join the run to tell the source (HAVE), so that its
// push, which knows nothing of READs, does not send them again.
Status PostcopyDestination::note_held(const Arrival& a) {
    std::lock_guard lock(held_mutex_);
    bool joins = held_.pages != 0 && held_.block == a.block && held_.offset + uint64_t{held_.pages} * kPcPage == a.offset;
    if (joins) {
        held_.pages += a.pages;
    } else {
        if (auto s = flush_held(); !s) return s;
        held_ = {a.block, a.pages, a.offset};
    }
    return held_.pages >= kHaveEvery ? flush_held() : Status{};
}

Status PostcopyDestination::flush_held() {
    Held run = std::exchange(held_, {});
    if (run.pages < kHaveAtLeast) return {};
    PcMessage m;
    m.type = PcType::have, m.block = run.block, m.pages = run.pages, m.offset = run.offset;
    trace("destination: HAVE block {} offset {:#x}, {} pages", run.block, run.offset, run.pages);
    return send_message(m);
}

Status PostcopyDestination::release(const Arrival& a) {
    if (a.kind == PcKind::end) return {};
    if (is_pull_slot(a.slot)) {  // this side's own push: the source knows of it already
        pulling_[a.slot - pull_slot(0)].reset();
        pulled_pages_ += a.pages;
        return {};
    }
    // Pulling the push, the source pushes nothing of a region told: it need not hear of READs.
    if (free_request_slots(a)) return pulls_ ? Status{} : note_held(a);
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
    if (reads_) {
        vmm::LatencySummary waits;
        {
            std::lock_guard lock(cq_mutex_);
            waits = fetch_waits_.summary();
        }
        vmm::log::info("rdma postcopy: {} faults read by RDMA READ ({} READs, readahead's among them), {} asked for "
                       "(before their region's KEYS came); {} READs awaited and placed by the fault thread (posted to "
                       "seen done: p50 {:.0f} us, p99 {:.0f} us), {} outlasted its wait",
                       reads(), reads_posted(), asks(), waits.count, waits.p50_us, waits.p99_us, fetched_late_.load());
    }
    PcMessage m;
    m.type = PcType::done;
    if (auto s = send_message(m); !s) return s;
    // DONE is delivered before the session may hang up.
    std::lock_guard lock(send_mutex_);
    return await_sends(0);
}

// Under send_mutex_: waits until at most `in_flight` SENDs are still to complete.
Status PostcopyDestination::await_sends(uint64_t in_flight) {
    if (reads_) return await_sends_beside_reads(in_flight);
    auto r = wait_cq(ep_, false, [this](const ibv_wc&) {
        ++sends_done_;
        return Status{};
    }, [&] { return sends_posted_ - sends_done_ <= in_flight; });
    return r ? Status{} : Status(r.error());
}

// With reads the receiving thread waits for the send CQ's events (next_with_reads): this takes
// what completed and waits for its word (cq_cv_), looking again every few milliseconds for a
// caller that is the receiving thread itself (DONE, after the last arrival).
Status PostcopyDestination::await_sends_beside_reads(uint64_t in_flight) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ep_.io_timeout_ms);
    std::unique_lock lock(cq_mutex_);
    for (;;) {
        if (auto s = poll_sends(); !s) return s;  // READs done stay for next() (or fetch())
        if (sends_posted_ - sends_done_ <= in_flight) return {};
        if (std::chrono::steady_clock::now() >= deadline) return silent(ep_);
        cq_cv_.wait_for(lock, std::chrono::milliseconds(5));
    }
}

}  // namespace rdma_migrate

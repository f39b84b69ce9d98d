// The source's half of the postcopy channel (postcopy_channel.h).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "postcopy_channel.h"
#include "proto/bytes.h"
#include "proto/resident_runs.h"
#include "trace.h"
#include "vmm/common/log.h"
#include "vmm/common/units.h"
#include "vmm/common/zero_page.h"

namespace rdma_migrate {

Status PostcopySource::post_receives() {
    if (auto s = receives_.init(ep_.memory(), kPcSourceReceives, Use::control_receive, "the postcopy receive buffers"); !s)
        return s;
    for (size_t i = 0; i < receives_.count(); ++i)
        if (auto s = repost(i); !s) return s;
    return {};
}

Status PostcopySource::repost(size_t i) {
    ibv_sge sge = receives_.sge(i);
    ibv_recv_wr wr{};
    wr.wr_id = i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return posted(ibv_post_recv(ep_.qp.get(), &wr, &bad), "ibv_post_recv (postcopy)");
}

Status PostcopySource::begin() {
    bool hello = false;
    auto got = wait_cq(ep_, true, [&](const ibv_wc& wc) -> Status {
        std::optional<Request> none;
        hello = true;
        return take_message(wc, none);
    }, [&] { return hello; });
    if (!got) return got.error().context("waiting for the destination's postcopy HELLO");
    if (hello_.request_slots + hello_.push_slots >= kSendQueueDepth) {
        return Error(fmt::format("RDMA postcopy HELLO: {} slots, more than this side's send queue holds ({})",
                                 hello_.request_slots + hello_.push_slots, kSendQueueDepth - 1));
    }
    uint64_t slots = hello_.request_slots + hello_.push_slots;
    auto area = vmm::Mapping::map("the postcopy staging slots", slots * kPcSlotSize, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS);
    if (!area) return area.error();
    auto mr = ep_.memory().register_memory(area->data(), area->size(), Use::postcopy_staging, "the postcopy staging slots");
    if (!mr) return mr.error();
    staging_ = std::move(*area);
    staging_mr_ = std::move(*mr);
    writing_.assign(slots + 1, false);  // + END's
    told_.assign(blocks_.size(), {});
    trace("source: postcopy channel open: {} request slots, {} push slots", hello_.request_slots, hello_.push_slots);
    return {};
}

// One message from the destination: HELLO (only first), a request, credit, or DONE.
Status PostcopySource::take_message(const ibv_wc& wc, std::optional<Request>& out) {
    if (wc.opcode != IBV_WC_RECV || wc.wr_id >= receives_.count()) {
        return Error(fmt::format("RDMA postcopy: an unexpected completion (opcode {}, wr_id {})", static_cast<int>(wc.opcode),
                                 wc.wr_id));
    }
    std::span<const uint8_t> bytes{receives_.at(wc.wr_id), wc.byte_len};
    auto m = keys_ ? open_pc_message(bytes, keys_->messages) : decode_pc_message(bytes);
    if (!m) return m.error();
    if (auto s = repost(wc.wr_id); !s) return s;
    bool first = hello_.slot_size == 0;
    if (first != (m->type == PcType::hello)) {
        return Error(first ? "RDMA postcopy: the destination's first message was not HELLO" : "RDMA postcopy: a second HELLO");
    }
    std::lock_guard lock(mutex_);
    switch (m->type) {
        case PcType::hello: hello_ = *m; return {};
        case PcType::request:
            if (m->slot >= hello_.request_slots || m->pages != 1) {
                return Error(fmt::format("RDMA postcopy REQUEST: slot {} of {}, {} pages (one page a request)", m->slot,
                                         hello_.request_slots, m->pages));
            }
            if (auto s = check_pc_range(blocks_, m->block, m->offset, 1); !s) return s;
            asked_[m->slot] = {m->block, m->offset};
            trace("source: REQUEST slot {} block {} offset {:#x}", m->slot, m->block, m->offset);
            out = Request{false, m->block, m->slot, m->offset};
            return {};
        case PcType::credit:
            if (m->consumed < credit_ || m->consumed > pushed_) {
                return Error(fmt::format("RDMA postcopy CREDIT: {} push slots consumed, after {} of {} written", m->consumed,
                                         credit_, pushed_));
            }
            credit_ = m->consumed;
            trace("source: CREDIT {}", credit_);
            cv_.notify_all();
            return {};
        case PcType::done: out = Request{true}; return {};
        case PcType::have:
            if (!reads_.on) return Error("RDMA postcopy: HAVE from a destination that did not agree to RDMA READ");
            if (auto s = check_pc_range(blocks_, m->block, m->offset, m->pages); !s) return s;
            trace("source: HAVE block {} offset {:#x}, {} pages", m->block, m->offset, m->pages);
            out = Request{false, m->block, 0, m->offset, m->pages};
            return {};
    }
    return Error("RDMA postcopy: unknown message");
}

Result<std::optional<PostcopySource::Request>> PostcopySource::next(int wait_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    for (;;) {
        std::optional<Request> out;
        bool took = false;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        auto got = wait_cq(ep_, true, [&](const ibv_wc& wc) {
            took = true;
            return take_message(wc, out);
        }, [&] { return took; }, static_cast<int>(std::max<int64_t>(0, left.count())));
        if (!got) {
            std::lock_guard lock(mutex_);
            failed_ = true;  // a push waiting for credit hears it
            cv_.notify_all();
            return got.error();
        }
        if (!*got) return std::optional<Request>{};
        if (out) return out;
    }
}

Status PostcopySource::await_push_credit() {
    std::unique_lock lock(mutex_);
    bool ok = cv_.wait_for(lock, std::chrono::milliseconds(ep_.io_timeout_ms),
                           [&] { return failed_ || pushed_ - credit_ < hello_.push_slots; });
    if (failed_) return Error("RDMA postcopy: the return path failed, so no push slot comes back");
    if (!ok) {
        return Error(fmt::format("RDMA postcopy: the destination gave no push slot back within {} ms (x-io-timeout)",
                                 ep_.io_timeout_ms));
    }
    return {};
}

// A push slot, once the destination has credited enough of the ring; counted before it is
// posted: its credit may come back before post_write returns.
Result<uint32_t> PostcopySource::take_push_slot() {
    if (auto s = await_push_credit(); !s) return s.error();
    std::lock_guard lock(mutex_);
    auto slot = static_cast<uint32_t>(hello_.request_slots + pushed_ % hello_.push_slots);
    ++pushed_;
    return slot;
}

namespace {
// Registrations at most a KEYS names, and the gap under which two runs of pages are joined.
constexpr size_t kExposedRunsAtMost = 64;
constexpr uint64_t kExposeGapPages = 256;  // 1 MiB

// The runs of [host, host + length) this process has, in pages from host; all of it when the
// kernel cannot say. A page that reads as zeros is left out: mincore counts a page only ever
// read (the shared zero page mapped) as resident, and registering it would make it; a zero
// page missing at the destination is asked for, or pushed, as a zero run. (Looking costs a
// read of each resident page until its first non-zero byte.)
std::vector<std::pair<uint64_t, uint64_t>> resident_pages(uint8_t* host, uint64_t length) {
    std::vector<uint8_t> in(length / kPcPage);
    if (::mincore(host, length, in.data()) != 0) return {{0, length / kPcPage}};
    for (size_t i = 0; i < in.size(); ++i)
        if ((in[i] & 1) != 0 && vmm::is_zero_page(host + i * kPcPage)) in[i] = 0;
    return resident_runs(in, kExposeGapPages, kExposedRunsAtMost);
}
}  // namespace

// The next stretch of RAM (kPcReadRegion) with pages in it, registered for remote read, run by
// run of the pages this process has (those it never touched are not missing at the
// destination), and told to the destination in one KEYS. A failure to register is not the
// migration's: the faults in what is left are asked for, as without READ.
Status PostcopySource::expose_next_region() {
    std::vector<PcRegion> told;
    while (told.empty()) {
        while (expose_block_ < blocks_.size() && expose_offset_ >= blocks_[expose_block_].size) ++expose_block_, expose_offset_ = 0;
        if (expose_block_ == blocks_.size()) {
            exposing_ = false;
            log_exposed("the pages this side has");
            return {};
        }
        const LocalBlock& b = blocks_[expose_block_];
        uint64_t from = expose_offset_, length = std::min(kPcReadRegion, b.size - from);
        expose_offset_ += length;
        for (auto [first, end] : resident_pages(b.host + from, length)) {
            if (auto r = expose_run(static_cast<uint32_t>(expose_block_), from + first * kPcPage, (end - first) * kPcPage)) {
                told.push_back(*r);
                continue;
            }
            exposing_ = false;
            return told.empty() ? Status{} : write_keys(told);
        }
    }
    return write_keys(told);
}

// Whether [offset, offset + pages) of `block` lies inside one region a KEYS told.
bool PostcopySource::told(uint32_t block, uint64_t offset, uint32_t pages) const {
    if (block >= told_.size()) return false;
    auto it = told_[block].upper_bound(offset);
    if (it == told_[block].begin()) return false;
    --it;
    return offset + uint64_t{pages} * kPcPage <= it->first + it->second;
}

void PostcopySource::log_exposed(const char* what) const {
    uint64_t ram = 0;
    for (const auto& block : blocks_) ram += block.size;
    vmm::log::info("x-rdma-postcopy-read: {} MiB of RAM registered for RDMA READ, of {} MiB in all: {}",
                   (exposed_ + (1 << 20) - 1) >> 20, ram >> 20, what);
}

// One run registered for remote read (and, authenticated, its pages tagged); none when it
// cannot be (rdma-pin-limit reached, the adapter refused), which says why in the log.
std::optional<PcRegion> PostcopySource::expose_run(uint32_t block, uint64_t offset, uint64_t length) {
    const LocalBlock& b = blocks_[block];
    if (reads_.pin_limit != 0 && exposed_ + length > reads_.pin_limit) {
        vmm::log::info("x-rdma-postcopy-read: {} of RAM exposed for RDMA READ, as much as rdma-pin-limit allows; the "
                       "destination asks for the pages of the rest",
                       vmm::format_size(exposed_));
        return std::nullopt;
    }
    auto mr = ep_.memory().register_memory(b.host + offset, length, Use::postcopy_read,
                                           fmt::format("{} of '{}' for RDMA READ", vmm::format_size(length), b.name));
    if (!mr) {
        vmm::log::warn("x-rdma-postcopy-read: {}; the destination asks for the pages of the rest", mr.error().message());
        return std::nullopt;
    }
    PcRegion r{block, (*mr)->rkey, offset, length, reinterpret_cast<uint64_t>(b.host + offset)};
    read_mrs_.push_back(std::move(*mr));
    if (keys_ && keys_->reads) {
        if (auto s = tag_region(r); !s) {
            vmm::log::warn("x-rdma-postcopy-read: {}; the destination asks for the pages of the rest", s.error().message());
            return std::nullopt;
        }
    }
    exposed_ += length;
    return r;
}

// An authenticated channel's region: each page's tag (postcopy_auth.h, PcPageTags) into a
// table registered for remote read, whose place the region then names.
Status PostcopySource::tag_region(PcRegion& r) {
    uint64_t pages = r.length / kPcPage;
    auto table = vmm::Mapping::map("the postcopy page tags", pages * kPcTagSize, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS);
    if (!table) return table.error();
    const uint8_t* ram = blocks_[r.block].host + r.offset;
    Out tags;
    for (uint64_t i = 0; i < pages; ++i) tags.u64(keys_->reads->tag(r.block, r.offset + i * kPcPage, {ram + i * kPcPage, kPcPage}));
    uint8_t* out = table->data();
    std::memcpy(out, tags.b.data(), tags.b.size());
    auto mr = ep_.memory().register_memory(out, pages * kPcTagSize, Use::postcopy_read, "the postcopy page tags");
    if (!mr) return mr.error();
    r.tag_rkey = (*mr)->rkey;
    r.tags = reinterpret_cast<uint64_t>(out);
    tag_tables_.push_back(std::move(*table));
    read_mrs_.push_back(std::move(*mr));
    return {};
}

Status PostcopySource::write_keys(std::span<const PcRegion> regions) {
    auto slot = take_push_slot();
    if (!slot) return slot.error();
    std::unique_lock writer(write_mutex_);
    if (auto s = wait_staging(writer, *slot); !s) return s;
    auto bytes = encode_pc_regions(regions, keys_.has_value());
    if (keys_) seal_pc_keys(bytes, keys_->writes);  // under write_mutex_: in the writes' order
    std::memcpy(staging_.data() + uint64_t{*slot} * kPcSlotSize, bytes.data(), bytes.size());
    trace("source: KEYS into slot {}: {} region(s) of block {} from offset {:#x}", *slot, regions.size(), regions[0].block,
          regions[0].offset);
    auto count = static_cast<uint8_t>(regions.size());
    if (auto s = post_write(*slot, static_cast<uint32_t>(bytes.size()), encode_pc_immediate({PcKind::keys, static_cast<uint16_t>(*slot), count}));
        !s)
        return s;
    for (const PcRegion& r : regions) told_[r.block][r.offset] = r.length;
    return {};
}

Status PostcopySource::write_done(const ibv_wc& wc) {
    if (wc.wr_id >= writing_.size()) return Error(fmt::format("RDMA postcopy: a completion for slot {}", wc.wr_id));
    writing_[wc.wr_id] = false;
    return {};
}

// A staging slot is reused once its last write has completed. What has completed is taken under
// write_mutex_; the wait for more is not (one writer waits for the CQ's event, the other on
// writes_cv_), so the other writer may post meanwhile: an answer never waits out a push's wait.
Status PostcopySource::wait_staging(std::unique_lock<std::mutex>& writer, uint32_t slot) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ep_.io_timeout_ms);
    for (;;) {
        auto taken = take_completions(ep_, false, [this](const ibv_wc& wc) { return write_done(wc); },
                                      [&] { return !writing_[slot]; });
        if (!taken) return taken.error();
        if (*taken) return {};
        if (std::chrono::steady_clock::now() >= deadline) return silent(ep_);
        if (polling_) {  // the other writer waits for the event, and wakes this one after it
            writes_cv_.wait_until(writer, deadline);
            continue;
        }
        polling_ = true;
        writer.unlock();
        auto signalled = await_cq_event(ep_, false, deadline);
        writer.lock();
        polling_ = false;
        writes_cv_.notify_all();
        if (!signalled) return signalled.error();
    }
}

Status PostcopySource::post_write(uint32_t slot, uint32_t length, uint32_t imm) {
    uint32_t remote = slot < writing_.size() - 1 ? slot : 0;  // END lands nowhere
    ibv_sge sge{reinterpret_cast<uint64_t>(staging_.data() + remote * kPcSlotSize), length, staging_mr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = slot;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(imm);
    wr.sg_list = length != 0 ? &sge : nullptr;
    wr.num_sge = length != 0 ? 1 : 0;
    wr.wr.rdma.remote_addr = hello_.landing + remote * kPcSlotSize;
    wr.wr.rdma.rkey = hello_.rkey;
    ibv_send_wr* bad = nullptr;
    if (auto s = posted(ibv_post_send(ep_.qp.get(), &wr, &bad), "ibv_post_send (postcopy)"); !s) return s;
    writing_[slot] = true;
    return {};
}

Result<bool> PostcopySource::send(uint32_t block, uint64_t offset, uint32_t pages, bool zero, std::span<const uint64_t> sums,
                                  std::optional<uint32_t> answer) {
    if (pages == 0 || pages > kPcMaxPages || (!sums.empty() && sums.size() != pages)) {
        return Error(fmt::format("internal: a postcopy write of {} pages with {} sums", pages, sums.size()));
    }
    if (auto s = check_pc_range(blocks_, block, offset, pages); !s) return s.error();
    uint32_t slot = 0;
    if (answer) {
        std::lock_guard lock(mutex_);
        auto it = asked_.find(*answer);
        if (it == asked_.end() || it->second != std::pair{block, offset}) {
            return Error(fmt::format("internal: an answer into request slot {} that does not ask for it", *answer));
        }
        asked_.erase(it);
        slot = *answer;
    } else {
        if (exposing_)
            if (auto s = expose_next_region(); !s) return s.error();
        if (reads_.push && told(block, offset, pages)) {  // the destination reads it (PULL)
            if (auto s = hold_back(block, offset, pages); !s) return s.error();
            return false;
        }
        if (auto s = flush_pulls(); !s) return s.error();  // what went before this write, first
        auto pushed = take_push_slot();
        if (!pushed) return pushed.error();
        slot = *pushed;
    }
    std::unique_lock writer(write_mutex_);  // after the wait for credit, which an answer never waits on
    if (auto s = wait_staging(writer, slot); !s) return s.error();
    PcImmediate imm{zero ? PcKind::zero : PcKind::data, static_cast<uint16_t>(slot), static_cast<uint8_t>(pages)};
    uint8_t* at = staging_.data() + uint64_t{slot} * kPcSlotSize;
    if (!zero) std::memcpy(at, blocks_[block].host + offset, pages * kPcPage);
    uint16_t flags = (sums.empty() ? uint16_t{0} : kPcSummed) | (keys_ ? kPcTagged : uint16_t{0});
    PcTrailer t{block, static_cast<uint16_t>(pages), flags, offset, {sums.begin(), sums.end()}};
    auto trailer = encode_pc_trailer(t);
    uint64_t trailer_at = pc_trailer_offset(imm);
    // The tag of what leaves: the staging copy, under write_mutex_, so in the order of the posts.
    if (keys_) encode_pc_tag(trailer, pc_write_tag(keys_->writes, imm.kind, trailer, {at, trailer_at}));
    std::memcpy(at + trailer_at, trailer.data(), trailer.size());
    trace("source: {} into slot {}: block {} offset {:#x}, {} pages{}", answer ? "answer" : "push", slot, block, offset,
          pages, zero ? " (zero)" : "");
    if (auto s = post_write(slot, static_cast<uint32_t>(trailer_at + trailer.size()), encode_pc_immediate(imm)); !s)
        return s.error();
    return true;
}

// ReadExposure::push: a run the push holds back joins the next PULL (the last run, when it
// follows on), which goes once it names kPcMaxPullRuns runs or its first is kPullWait old.
Status PostcopySource::hold_back(uint32_t block, uint64_t offset, uint32_t pages) {
    if (pulls_out_.empty()) pulls_since_ = std::chrono::steady_clock::now();
    PcPullRun* last = pulls_out_.empty() ? nullptr : &pulls_out_.back();
    if (last != nullptr && last->block == block && last->offset + uint64_t{last->pages} * kPcPage == offset &&
        last->pages + pages <= kPcMaxPullPages) {
        last->pages += pages;
    } else {
        pulls_out_.push_back({block, pages, offset});
    }
    held_back_ += pages;
    bool due = pulls_out_.size() == kPcMaxPullRuns || std::chrono::steady_clock::now() - pulls_since_ >= kPullWait;
    return due ? flush_pulls() : Status{};
}

// The runs held back so far, in one PULL write into the push ring, with the pace to read them at.
Status PostcopySource::flush_pulls() {
    if (pulls_out_.empty()) return {};
    auto slot = take_push_slot();
    if (!slot) return slot.error();
    std::unique_lock writer(write_mutex_);
    if (auto s = wait_staging(writer, *slot); !s) return s;
    auto bytes = encode_pc_pulls({reads_.pull_rate, pulls_out_});
    if (keys_) seal_pc_keys(bytes, keys_->writes, PcKind::pull);  // under write_mutex_: in the writes' order
    std::memcpy(staging_.data() + uint64_t{*slot} * kPcSlotSize, bytes.data(), bytes.size());
    trace("source: PULL into slot {}: {} run(s) from block {} offset {:#x}", *slot, pulls_out_.size(), pulls_out_[0].block,
          pulls_out_[0].offset);
    auto count = static_cast<uint8_t>(pulls_out_.size());
    pulls_out_.clear();
    return post_write(*slot, static_cast<uint32_t>(bytes.size()), encode_pc_immediate({PcKind::pull, static_cast<uint16_t>(*slot), count}));
}

Status PostcopySource::end() {
    if (auto s = flush_pulls(); !s) return s;
    if (reads_.push) {
        vmm::log::info("x-rdma-postcopy-read-push: {} pages held back for the destination to read itself",
                       held_back_);
    }
    if (exposing_) log_exposed("every page had gone before the rest");
    std::lock_guard writer(write_mutex_);
    uint32_t end_slot = static_cast<uint32_t>(writing_.size() - 1);
    if (auto s = post_write(end_slot, 0, encode_pc_immediate({PcKind::end, 0, 0})); !s) return s;
    // Every write complete: the staging slots may go once the session ends.
    auto done = wait_cq(ep_, false, [this](const ibv_wc& wc) { return write_done(wc); }, [&] { return std::find(writing_.begin(), writing_.end(), true) == writing_.end(); });
    return done ? Status{} : Status(done.error());
}

}  // namespace rdma_migrate

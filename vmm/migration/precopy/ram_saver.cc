#include "vmm/migration/precopy/ram_saver.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "vmm/memory/dirty_bitmap.h"
#include "vmm/migration/wire/page_sums.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

using memory::kPageShift;
using memory::kPageSize;

RamSaver::RamSaver(const memory::GuestMemory& mem, stream::ByteStream& stream, SourceRamChannel* channel, RateLimiter& limiter,
                   bool zero_markers, RamStats& stats, Verify verify, PageSummer summer)
    : mem_(mem), stream_(&stream), channel_(channel), limiter_(limiter), zero_markers_(zero_markers), stats_(stats),
      verify_(verify), summer_(summer), zero_sum_([&] {
          std::vector<uint8_t> page(kPageSize, 0);
          return summer_(page.data());
      }()) {
    listen_to_channel();
}

RamSaver::~RamSaver() {
    if (channel_ != nullptr) channel_->on_arrival(nullptr);
}

void RamSaver::listen_to_channel() {
    if (channel_ == nullptr) return;
    channel_->on_arrival([this] {
        count_arrived();
        if (progress_) progress_();
    });
}

void RamSaver::rebind(stream::ByteStream& stream, SourceRamChannel* channel, Verify verify) {
    verify_ = verify;
    round_sums_.clear();  // a round's that the broken link cut: the round goes again
    if (channel_ != nullptr) {
        channel_->on_arrival(nullptr);
        bytes_ -= std::min(channel_->in_flight(), bytes_);  // it never went: it goes again, counted then
    }
    stream_ = &stream;
    channel_ = channel;
    listen_to_channel();
}

void RamSaver::count_arrived() {
    // What has arrived, not what the channel has merely accepted: an RDMA channel may have
    // many MiB of writes in flight.
    uint64_t pending = channel_ != nullptr ? std::min(channel_->in_flight(), bytes_) : 0;
    stats_.transferred = bytes_ - pending;
    stats_.in_flight = pending;
}

Status RamSaver::record(const std::vector<uint8_t>& header, std::span<const uint8_t> ram, Pages pages) {
    // Paced first, then sent, then counted: under a cap, the figures move when bytes go out,
    // not a record ahead of them.
    uint64_t n = header.size() + ram.size();
    if (auto s = limiter_.consume(n); !s) return s;
    auto s = ram.empty() ? stream_->write(header) : stream_->write_ram(header, ram);
    if (!s) return s;
    account(pages);
    sent(n);
    return {};
}

void RamSaver::account(Pages pages) {
    stats_.normal += pages.data;
    stats_.normal_bytes += pages.data << kPageShift;
    stats_.duplicate += pages.zero;
    done_pages(pages.data + pages.zero);
    if (round_ == 0) stats_.bulk_to_send -= std::min(stats_.bulk_to_send, (pages.data + pages.zero) << kPageShift);
}

void RamSaver::sent(uint64_t n) {
    bytes_ += n;
    count_arrived();
    // The monitor's figures move as data does: every 4 MiB, and under a low cap at least four
    // times a second (the time left is predicted from them).
    if (!progress_) return;
    auto now = std::chrono::steady_clock::now();
    if (bytes_ - last_progress_ >= (4u << 20) || now - last_progress_at_ >= std::chrono::milliseconds(250)) {
        last_progress_ = bytes_;
        last_progress_at_ = now;
        progress_();
    }
}

Status RamSaver::begin(uint32_t round) {
    round_ = round;
    round_sums_.clear();
    stopped_ = false;
    unsent_.clear();
    last_progress_at_ = std::chrono::steady_clock::now();
    if (progress_) progress_();  // the round's `remaining` is published before any of it goes
    Record r;
    r.type = RecordType::round_begin;
    r.round = round;
    if (auto s = record(encode_record(r)); !s) return s;
    if (channel_ == nullptr) return {};
    if (auto s = stream_->flush(); !s) return s;  // the destination starts serving the round
    return channel_->begin_round(round);
}

// The sums of pages handed to a channel that does not checksum its own records: kept for SUMS
// records after its round, or handed to a channel that carries them (before the pages).
Status RamSaver::sum_for_channel(uint32_t block, uint64_t first_page, uint64_t count, bool zero) {
    if (!sums_for_channel()) return {};
    std::vector<uint64_t> sums(count, zero_sum_);
    if (!zero) {
        const uint8_t* host = mem_.blocks()[block]->host() + (first_page << kPageShift);
        for (uint64_t i = 0; i < count; ++i) sums[i] = summer_(host + (i << kPageShift));
    }
    if (verify_ == Verify::channel_sums) return channel_->sums(block, first_page << kPageShift, sums);
    for (uint64_t at = 0; at < count; at += kMaxSumsRecord) {  // SUMS records of at most kMaxSumsRecord pages
        uint64_t n = std::min<uint64_t>(kMaxSumsRecord, count - at);
        round_sums_.push_back({block, (first_page + at) << kPageShift,
                               {sums.begin() + static_cast<long>(at), sums.begin() + static_cast<long>(at + n)}});
    }
    return {};
}

// After the channel's round: every write of it has landed, so the destination can check them.
// One write for all of them: over a plugin's control channel each write may be a message with
// its own round trip, and a round's dirty runs can be many.
Status RamSaver::send_round_sums() {
    if (round_sums_.empty()) return {};
    std::vector<uint8_t> all;
    for (const Sums& s : round_sums_) {
        Record r;
        r.type = RecordType::sums;
        r.block = s.block;
        r.offset = s.offset;
        r.length = s.sums.size() << kPageShift;
        auto header = encode_record(r);
        all.insert(all.end(), header.begin(), header.end());
        append_sums(all, s.sums);
    }
    round_sums_.clear();
    if (auto st = stream_->write(all); !st) return st;
    sent(all.size());
    return {};
}

Status RamSaver::end(uint32_t round) {
    if (channel_ != nullptr) {
        if (auto s = channel_->end_round(); !s) return s;
        if (auto s = send_round_sums(); !s) return s;
    }
    Record r;
    r.type = RecordType::round_end;
    r.round = round;
    if (auto s = record(encode_record(r)); !s) return s;
    if (auto s = stream_->flush(); !s) return s;
    if ((!sums_for_channel() && !wait_landed_) || channel_ == nullptr) return {};
    // The round ends when the destination has landed and checked it: what that costs is then
    // part of each round's measured time (which convergence sees), not left to run into the
    // pause that follows (what multifd's lanes still carried took 5-8 ms of a postcopy switch
    // on the test machine before).
    auto reply = read_reply(*stream_);
    if (!reply) return reply.error().context("waiting for the destination to land the round");
    if (reply->type == ReplyType::refused) return Error("the destination refused the round: " + reply->reason);
    if (reply->type != ReplyType::round_checked) return Error("the destination answered a round's end out of turn");
    return {};
}

void RamSaver::done_pages(uint64_t n) { stats_.remaining -= std::min(stats_.remaining, n << kPageShift); }

// Pieces of at most 4 MiB, inline or through a channel alike: the rate limit and the progress
// figures follow every piece, not whole runs (which can span all of RAM). Under a cap, a
// quarter of a second's worth (a power of two, at least 64 KiB), so that the figures, and the
// time left predicted from them, move four times a second however low the cap. A piece ends on
// a boundary of its own size in the block, so a run that starts mid-way does not split every
// RDMA chunk (a power of two of 1 MiB or more) it covers into two writes.
uint64_t RamSaver::pages_per_piece() {
    constexpr uint64_t kMax = kMaxPagesRecord >> kPageShift, kMin = (64 * 1024) >> kPageShift;
    uint64_t rate = limiter_.rate();
    if (rate == 0) return kMax;
    return std::clamp<uint64_t>(std::bit_floor(std::max<uint64_t>(rate / 4, 1) >> kPageShift | 1), kMin, kMax);
}

Status RamSaver::send_data(uint32_t block, uint64_t first_page, uint64_t count) {
    const auto& b = *mem_.blocks()[block];
    const uint64_t kPagesPerRecord = pages_per_piece();
    if (channel_ == nullptr && count > kPagesPerRecord) {
        // A run longer than one record: the destination may prepare its memory ahead of it.
        Record r;
        r.type = RecordType::populate;
        r.block = block;
        r.offset = first_page << kPageShift;
        r.length = count << kPageShift;
        if (auto s = record(encode_record(r)); !s) return s;
    }
    for (uint64_t p = first_page, n = 0; p < first_page + count; p += n) {
        if (stop_at(block, p, first_page + count - p)) return {};
        n = std::min(kPagesPerRecord - p % kPagesPerRecord, first_page + count - p);
        // Counted piece by piece, as each goes out, so that `normal` and `remaining` are true
        // at every instant of a capped round, not only at its end.
        if (channel_ != nullptr) {
            if (auto s = limiter_.consume(n << kPageShift); !s) return s;
            if (auto s = sum_for_channel(block, p, n, false); !s) return s;  // as read now, as a spliced page is
            if (auto s = channel_->send(block, p << kPageShift, n << kPageShift); !s) return s;
            account({n, 0});
            sent(n << kPageShift);
            continue;
        }
        Record r;
        r.type = verify_ == Verify::summed ? RecordType::pages_summed : RecordType::pages;
        r.block = block;
        r.offset = p << kPageShift;
        r.length = n << kPageShift;
        std::span<const uint8_t> data{b.host() + r.offset, r.length};
        auto header = encode_record(r);
        // XXH3, or an authenticated link's MACs (kept over its fallback).
        if (verify_ == Verify::summed) append_page_sums(header, data, summer_);
        if (auto s = record(header, data, {n, 0}); !s) return s;
    }
    return {};
}

Status RamSaver::send_zero(uint32_t block, uint64_t first_page, uint64_t count) {
    if (channel_ != nullptr) {
        // Only a later round's zero pages can settle a page owed from an earlier one.
        if (round_ != 0) {
            if (auto s = sum_for_channel(block, first_page, count, true); !s) return s;
        }
        if (auto s = channel_->send_zero(block, first_page << kPageShift, count << kPageShift); !s) return s;
        account({0, count});
        return {};
    }
    Record r;
    r.type = RecordType::zero;
    r.block = block;
    r.offset = first_page << kPageShift;
    r.length = count << kPageShift;
    return record(encode_record(r), {}, {0, count});
}

Status RamSaver::send_run(uint32_t block, uint64_t first_page, uint64_t count) {
    const uint8_t* host = mem_.blocks()[block]->host();
    uint64_t end = first_page + count;
    uint64_t p = first_page;
    while (p < end) {
        if (stop_at(block, p, end - p)) return {};
        bool zero = zero_markers_ && is_zero_page(host + (p << kPageShift));
        uint64_t q = p + 1;
        while (q < end && (zero_markers_ && is_zero_page(host + (q << kPageShift))) == zero) ++q;
        Status s = zero ? send_zero(block, p, q - p) : send_data(block, p, q - p);
        if (!s) return s;
        p = q;
    }
    return {};
}

bool RamSaver::stop_at(uint32_t block, uint64_t first, uint64_t count) {
    if (!stopped_ && (!stop_ || !stop_())) return false;
    stopped_ = true;
    if (unsent_.empty()) {
        for (const auto& b : mem_.blocks()) unsent_.emplace_back((b->pages() + 63) / 64, 0);
    }
    memory::set_run(unsent_[block], first, count);
    return true;
}

void RamSaver::skipped(uint64_t n) {
    stats_.skipped_unpopulated += n;
    done_pages(n);
}

Status RamSaver::bulk_round(memory::PagemapReader* pagemap) {
    stats_.remaining = 0;  // every page of RAM is this round's to send, skip or mark as zero
    stats_.bulk_to_send = 0;  // ... of which these bytes cost the link (the time left follows them)
    for (const auto& b : mem_.blocks()) {
        stats_.remaining += b->size();
        stats_.bulk_to_send += memory::pages_to_send(pagemap, *b) << kPageShift;
    }
    if (auto s = begin(0); !s) return s;
    for (uint32_t i = 0; i < mem_.blocks().size(); ++i) {
        const auto& b = *mem_.blocks()[i];
        if (pagemap == nullptr || b.file_backed()) {
            if (auto s = send_run(i, 0, b.pages()); !s) return s;
            continue;
        }
        uint64_t next = 0;  // the pages before a populated run were never touched: skipped as passed
        auto s = pagemap->for_each_populated_run(b, [&](uint64_t first, uint64_t n) {
            skipped(first - next);
            next = first + n;
            return send_run(i, first, n);
        });
        if (!s) return s;
        skipped(b.pages() - next);
    }
    return end(0);
}

Status RamSaver::dirty_round(uint32_t round, const std::vector<std::vector<uint64_t>>& bitmaps) {
    stats_.remaining = 0;
    for (const auto& words : bitmaps) stats_.remaining += memory::count_bits(words.data(), words.size()) << kPageShift;
    if (auto s = begin(round); !s) return s;
    for (uint32_t i = 0; i < bitmaps.size(); ++i) {
        uint64_t pages = mem_.blocks()[i]->pages();
        for (auto r = memory::next_run(bitmaps[i], 0, pages); r.count != 0; r = memory::next_run(bitmaps[i], r.first + r.count, pages)) {
            if (auto s = send_run(i, r.first, r.count); !s) return s;
        }
    }
    return end(round);
}

}  // namespace vmm::migration

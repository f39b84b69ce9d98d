#include "vmm/migration/precopy/ram_loader.h"

#include <fmt/format.h>

#include "vmm/migration/transport/stream_io.h"

namespace vmm::migration {

Status StreamLoader::load_pages(const Record& r) {
    if (!in_round_) return Error("migration stream: PAGES outside a RAM round");
    // read_record checked the range against this block's size; the host span is exact.
    uint8_t* dst = mem_.blocks()[r.block]->host() + r.offset;
    uint64_t populated = populator_ ? populator_->ready(dst, r.length) : 0;
    if (auto s = land_pages(*stream_, r, dst, verifier_, populated); !s) return s;
    if (populator_) populator_->received(dst + r.length);
    if (arrivals_ != nullptr) arrivals_->landed(r.block, r.offset / memory::kPageSize, r.length / memory::kPageSize, round_);
    counters_.pages += r.length / memory::kPageSize;
    counters_.bytes += r.length;
    return {};
}

Status StreamLoader::load_zero(const Record& r) {
    if (!in_round_) return Error("migration stream: ZERO outside a RAM round");
    land_zero(r, mem_.blocks()[r.block]->host() + r.offset, verifier_);
    if (arrivals_ != nullptr) arrivals_->landed(r.block, r.offset / memory::kPageSize, r.length / memory::kPageSize, round_);
    counters_.zero_pages += r.length / memory::kPageSize;
    return {};
}

Status StreamLoader::load_populate(const Record& r) {
    if (!in_round_) return Error("migration stream: POPULATE outside a RAM round");
    if (!populator_) populator_ = std::make_unique<Populator>();
    populator_->expect(mem_.blocks()[r.block]->host() + r.offset, r.length);
    counters_.announced += r.length;
    return {};
}

Status StreamLoader::load_sums(const Record& r) {
    if (!in_round_ || channel_ == nullptr) return Error("migration stream: SUMS outside a RAM channel's round");
    if (verifier_ == nullptr || !round_sums_) return Error("migration stream: SUMS, but the source did not announce them");
    std::vector<uint64_t> sums;
    if (auto s = read_page_sums(*stream_, r.length, sums); !s) return s;
    // The channel's round has ended: every write of it is in guest RAM, ready to be checked.
    verifier_->check(r.block, r.offset, {mem_.blocks()[r.block]->host() + r.offset, r.length}, sums);
    return {};
}

StreamLoader::~StreamLoader() {
    if (checker_ && channel_ != nullptr) channel_->on_sums(nullptr);  // before the checker goes
}

Status StreamLoader::check_channel_sums() {
    if (verifier_ == nullptr || channel_ == nullptr || !channel_->carries_sums()) {
        return Error("the source sends verify-ram sums through the RAM channel, but this side's transport cannot "
                     "deliver them: use the same vmm and plugin release on both sides");
    }
    checker_ = std::make_unique<ChannelChecker>(mem_, *verifier_);
    return listen_to_channel();
}

bool StreamLoader::track_arrivals(ArrivalRounds* arrivals) {
    arrivals_ = arrivals;
    return listen_to_channel().ok();
}

Status StreamLoader::listen_to_channel() {
    if (channel_ == nullptr) return {};
    if (checker_) {
        if (!channel_->carries_sums()) return Error("verify-ram: the new connection's RAM channel cannot deliver sums");
        channel_->on_sums([this](uint32_t block, uint64_t offset, std::span<const uint64_t> sums) {
            if (!in_round_) return Status(Error("verify-ram: the transport delivered sums outside a RAM round"));
            return checker_->add(block, offset, sums, round_);
        });
    }
    if (arrivals_ != nullptr) {
        auto landed = [a = arrivals_](uint32_t block, uint64_t first, uint64_t count, uint32_t round) {
            a->landed(block, first, count, round);
        };
        // Pages whose sums matched arrived whole in their round, before the round's end.
        if (checker_) checker_->on_checked(landed);
        if (!channel_->on_landed(landed)) {
            return Error("a resumable precopy: this RAM channel cannot say which pages arrived");
        }
    }
    return {};
}

void StreamLoader::leave_channel() {
    if (channel_ == nullptr) return;
    ChannelCounts c = channel_->counts();
    carried_.pages += c.pages, carried_.zero_pages += c.zero_pages, carried_.bytes += c.bytes;
    if (checker_) {
        channel_->on_sums(nullptr);
        checker_->finish_queued();  // what landed before the break counts once checked
    }
    if (arrivals_ != nullptr) channel_->on_landed(nullptr);
    channel_ = nullptr;
}

Status StreamLoader::rebind(stream::ByteStream& stream, DestRamChannel* channel) {
    leave_channel();
    stream_ = &stream;
    in_round_ = false;
    have_state_ = false;
    stop_populating();  // a run announced on the broken link will not come
    channel_ = channel;
    if (channel_ != nullptr) channel_->count_from(carried_);
    carried_ = {};
    return listen_to_channel();
}

// Every sum of the round is checked (SUMS records before ROUND_END, or the channel's, whose
// checks are waited for here): say so.
Status StreamLoader::answer_checked() {
    if (checker_) checker_->drain();
    if (auto s = stream_->write(encode_reply(ReplyType::round_checked)); !s) return s;
    return stream_->flush();
}

Status StreamLoader::load_state(const Record& r) {
    if (in_round_) return Error("migration stream: STATE inside a RAM round");
    if (have_state_) return Error("migration stream: a second STATE record");
    std::vector<uint8_t> blob(r.length);
    if (auto s = stream_->read_exact(blob); !s) return s;
    have_state_ = true;
    return on_state_(blob);
}

Status StreamLoader::round_begin(const Record& r) {
    if (in_round_) return Error(fmt::format("migration stream: round {} began inside round {}", r.round, round_));
    in_round_ = true;
    round_ = r.round;
    ++counters_.rounds;
    if (channel_ != nullptr) return channel_->serve_round(r.round);
    return {};
}

Status StreamLoader::load_discard(const Record& r) {
    if (!postcopy_allowed_) return Error("migration stream: DISCARD, but the header did not announce postcopy-ram");
    if (in_round_) return Error("migration stream: DISCARD inside a RAM round");
    if (have_state_) return Error("migration stream: DISCARD after the device state");
    uint64_t pages = 0;  // runs of missing pages are separated by present ones: at most half of RAM
    for (const auto& b : blocks_) pages += b.size / memory::kPageSize;
    if (discards_.size() > pages / 2) return Error("migration stream: more DISCARD records than RAM could need");
    discards_.push_back(r);
    // What precopy left owed there (a page the guest rewrote while the source read it) is
    // dropped now, and postcopy brings it again, checked against its sum then.
    if (verifier_ != nullptr) verifier_->replaced(r.block, r.offset, r.length);
    return {};
}

// END, or POSTCOPY (the guest runs on the destination before every page has come).
Status StreamLoader::finish(bool postcopy) {
    const char* what = postcopy ? "POSTCOPY" : "END";
    if (postcopy && !postcopy_allowed_) return Error("migration stream: POSTCOPY, but the header did not announce postcopy-ram");
    if (in_round_) return Error(fmt::format("migration stream: {} inside a RAM round", what));
    if (!have_state_) return Error(fmt::format("migration stream: {} before the device state", what));
    switched_ = postcopy;
    return verifier_ != nullptr ? verifier_->settle() : Status{};
}

Status StreamLoader::run() {
    for (;;) {
        auto r = read_record(*stream_, blocks_, static_cast<uint32_t>(memory::kPageSize));
        if (!r) return r.error();
        Status s;
        switch (r->type) {
            case RecordType::round_begin: s = round_begin(*r); break;
            case RecordType::pages:
            case RecordType::pages_summed: s = load_pages(*r); break;
            case RecordType::zero: s = load_zero(*r); break;
            case RecordType::populate: s = load_populate(*r); break;
            case RecordType::round_end:
                if (!in_round_ || r->round != round_) {
                    return Error(fmt::format("migration stream: end of round {} without its beginning", r->round));
                }
                in_round_ = false;
                if ((round_sums_ || checker_ || landed_rounds_) && channel_ != nullptr) s = answer_checked();
                break;
            case RecordType::state: s = load_state(*r); break;
            case RecordType::sums: s = load_sums(*r); break;
            case RecordType::discard: s = load_discard(*r); break;
            case RecordType::session: return Error("migration stream: a SESSION record after the header");
            case RecordType::end:
            case RecordType::postcopy: return finish(r->type == RecordType::postcopy);
        }
        if (!s) return s;
    }
}

}  // namespace vmm::migration

#include "proto/sums_outbox.h"

#include <fmt/format.h>

#include <algorithm>

namespace rdma_migrate {

namespace {
constexpr size_t kPageSize = 4096;
}  // namespace

Status SumsOutbox::give(SumsEntry e) {
    if (next_) return Error("internal: verify-ram sums given twice without the range they belong to");
    next_ = std::move(e);
    return {};
}

Result<std::optional<SumsEntry>> SumsOutbox::take(uint32_t block, uint64_t offset, uint64_t length) {
    if (!next_) return std::optional<SumsEntry>{};
    SumsEntry e = std::move(*next_);
    next_.reset();
    if (e.block != block || e.offset != offset || e.sums.size() * kPageSize != length) {
        return Error(fmt::format("internal: verify-ram sums for {}:{:#x} ({} pages) came before pages {}:{:#x}+{:#x}", e.block,
                                 e.offset, e.sums.size(), block, offset, length));
    }
    return std::optional<SumsEntry>(std::move(e));
}

uint64_t SumsOutbox::await_writes(SumsEntry e, size_t pieces) {
    uint64_t number = ++numbered_;
    if (pieces == 0) {
        ready(std::move(e));
    } else {
        waiting_.emplace(number, Waiting{pieces, std::move(e)});
    }
    return number;
}

void SumsOutbox::write_landed(uint64_t number) {
    auto it = waiting_.find(number);
    if (it == waiting_.end() || --it->second.pieces > 0) return;
    ready(std::move(it->second.entry));
    waiting_.erase(it);
}

void SumsOutbox::compress_sent() {
    for (SumsEntry& e : zero_) ready(std::move(e));  // the destination zeroes before it reads on
    zero_.clear();
}

void SumsOutbox::ready(SumsEntry e) {
    ready_pages_ += e.sums.size();
    ready_.push_back(std::move(e));
}

std::vector<std::vector<SumsEntry>> SumsOutbox::batches(bool all) {
    std::vector<std::vector<SumsEntry>> messages;
    if (ready_.empty() || (!all && !due())) return messages;
    std::vector<SumsEntry> ready = std::move(ready_);
    ready_.clear();
    ready_pages_ = 0;
    std::vector<SumsEntry> batch;
    size_t in_batch = 0;
    for (SumsEntry& e : ready) {
        for (size_t at = 0; at < e.sums.size();) {  // an entry larger than a message is split
            size_t n = std::min(e.sums.size() - at, kMaxSumsPerMessage - in_batch);
            auto from = e.sums.begin() + static_cast<long>(at);
            batch.push_back({e.block, e.offset + at * kPageSize, {from, from + static_cast<long>(n)}});
            in_batch += n;
            at += n;
            if (in_batch == kMaxSumsPerMessage || batch.size() == kMaxRepeat) {
                messages.push_back(std::move(batch));
                batch.clear();
                in_batch = 0;
            }
        }
    }
    if (!batch.empty()) messages.push_back(std::move(batch));
    return messages;
}

Status SumsOutbox::round_ended() const {
    size_t left = waiting_.size() + zero_.size() + (next_ ? 1 : 0);
    if (left == 0) return {};
    return Error(fmt::format("internal: {} ranges' verify-ram sums still wait for their writes at the round's end", left));
}

}  // namespace rdma_migrate

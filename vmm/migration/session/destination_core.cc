#include "vmm/migration/session/destination_core.h"

#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

DestinationCore::DestinationCore(machine::Machine& m, Uri u, Options o, stream::CancelToken c, bool paused, StatusFn s,
                                 FailFn f)
    : machine(m), uri(std::move(u)), options(std::move(o)), cancel(std::move(c)), stay_paused(paused),
      on_status(std::move(s)), on_failure(std::move(f)) {
    stats.uri = uri.text;
    stats.ram.total = m.memory().total_size();
}

void DestinationCore::set_status(MigrationStatus s) {
    {
        std::lock_guard lock(mutex);
        stats.status = s;
    }
    if (on_status && options.caps.events) on_status(s);
}

void DestinationCore::refuse(stream::ByteStream& st, const Error& e) {
    // Best effort: the source learns why; the connection may already be gone.
    if (st.write(encode_reply(ReplyType::refused, e.message()))) (void)st.flush();
}

void DestinationCore::publish(const StreamLoader& loader, const DestRamChannel* channel, const RamVerifier* verifier) {
    std::lock_guard lock(mutex);
    ChannelCounts lanes = channel != nullptr ? channel->counts() : ChannelCounts{};
    stats.ram.normal = loader.counters().pages + lanes.pages;
    stats.ram.duplicate = loader.counters().zero_pages + lanes.zero_pages;
    stats.ram.transferred = loader.counters().bytes + lanes.bytes;
    stats.ram.normal_bytes = stats.ram.normal * memory::kPageSize;
    stats.rounds = static_cast<uint32_t>(loader.counters().rounds);
    stats.ram.populate_announced = loader.counters().announced;
    stats.ram.populated_ahead = loader.populated_ahead();
    if (verifier != nullptr) {
        stats.ram.verified_bytes = verifier->checked_bytes();
        stats.ram.verify_mismatches = verifier->mismatches();
        stats.ram.verified_in_round = loader.checks_channel_sums();
        stats.ram.verified_after_round = loader.checked_late();
    }
}

}  // namespace vmm::migration

// verify-ram's page sums over RDMA (kCapSums, beyond the spec and QEMU; docs/rdma-protocol.md):
// the session's side. What waits for which write or COMPRESS, and how ready sums make messages,
// is proto/sums_outbox.h's; here they are tied to the lanes' completions and sent as SUMS messages
// while the round runs, between registration requests, so the destination checks them as the
// round goes on; the rest follow at the round's end, before REGISTER FINISHED. The destination
// checks each entry's block and range and hands it to vmm (on_sums).
#include <fmt/format.h>

#include "source_session.h"
#include "trace.h"

namespace rdma_migrate {

namespace {
// A SUMS message is not waited for: writes posted after it queue behind it and the source goes
// on; the next control message waits for the destination's READY, which follows its arrival.
constexpr auto kSumsSent = ControlChannel::Sent::later;
}  // namespace

Status SourceSession::ram_sums(uint32_t block, uint64_t offset, std::span<const uint64_t> sums) {
    if (!link_.carries_sums()) return Error("internal: verify-ram sums on an RDMA connection that did not agree on them");
    SumsEntry e{block, offset, {sums.begin(), sums.end()}};
    if (auto s = check_sums_entry(e, cfg_.blocks); !s) return s.error().context("internal");
    return sums_.give(std::move(e));
}

bool SourceSession::sums_due() const { return !remote_regs_.awaiting_answer() && sums_.due(); }

// Sends what is ready: mid-round (`all` false) only once it is worth a message, at the round's
// end everything (the writes drained, the COMPRESS messages sent). Never while a registration
// request waits for its answer: the destination answers that before it reads anything else.
// The batches are taken out first: a send drives the completion queue, which may make more sums
// ready meanwhile (they go with the next flush).
Status SourceSession::flush_sums(bool all) {
    auto messages = sums_.batches(all);
    for (const auto& batch : messages)
        if (auto s = ctl_.exchange_send(encode_sums(batch), kSumsSent); !s) return s;
    if (!messages.empty()) trace("source: SUMS for {} ranges in {} message(s)", messages.back().size(), messages.size());
    return {};
}

// At the round's end, after its writes drained: every sum is ready and goes now.
Status SourceSession::finish_sums() {
    if (auto s = sums_.round_ended(); !s) return s;
    return flush_sums(true);
}

}  // namespace rdma_migrate

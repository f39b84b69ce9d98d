#include "connection.h"

#include <fmt/format.h>

#include "vmm/common/units.h"

namespace rdma_migrate {

namespace {
// The exporter label (RFC 8446 §7.5) of the RAM sums' key: both sides must use this one.
constexpr const char* kSumsKeyLabel = "EXPORTER-vmm-rdma-ram-sums";
}  // namespace

Connection::Connection(std::unique_ptr<Endpoint> ep, std::unique_ptr<ControlChannel> ctl, SessionConfig cfg,
                       ChunkGeometry g, uint32_t agreed, std::function<Status()> blocks_requested)
    : channels_(std::move(ep)), ctl_(std::move(ctl)), cfg_(std::move(cfg)), geo_(g), agreed_(agreed),
      max_entries_((agreed & kCapBatch) != 0 ? kMaxRepeat : 1), steps_(channels_.first().steps),
      summary_(channels_.first().describe),
      stream_(*ctl_, std::move(blocks_requested)) {
    ctl_->error_text((agreed & kCapErrorText) != 0);
}

std::vector<TimedStep> Connection::setup_steps() const {
    std::lock_guard lock(steps_mutex_);
    return steps_;
}

void Connection::add_steps(const std::vector<TimedStep>& steps, bool first) {
    std::lock_guard lock(steps_mutex_);
    steps_.insert(first ? steps_.begin() : steps_.end(), steps.begin(), steps.end());
}

// Writes still in flight are not waited for: a completed migration drained them at the end of
// its last round, and a failed one may have a connection (or a device) that will never
// complete them. The members then unwind: MRs before the PD.
Connection::~Connection() { hang_up(); }

Result<std::vector<uint8_t>> Connection::sums_key(size_t size) const {
    if (!authenticated()) return Error("internal: a sums key asked of an RDMA connection that is not authenticated");
    return ctl_->export_key(kSumsKeyLabel, size);
}

Result<std::optional<PcKeys>> Connection::postcopy_keys() const {
    if (!authenticated()) return std::optional<PcKeys>{};
    auto k = ctl_->export_key(kPcAuthLabel, kPcAuthKeySize);
    if (!k) return k.error();
    auto keys = PcKeys::from(*k);
    if (!keys) return keys.error();
    if ((agreed_ & kCapPostcopyRead) != 0) {  // pages read by RDMA READ come with tags of their own
        auto r = ctl_->export_key(kPcReadLabel, kPcReadKeySize);
        if (!r) return r.error();
        if (r->size() != kPcReadKeySize) return Error("internal: a postcopy read key of the wrong size");
        keys->reads.emplace(std::span<const uint8_t, 16>(r->data(), 16));
    }
    return std::optional<PcKeys>{std::move(*keys)};
}

void Connection::summarize(const std::string& note) {
    std::string mode = cfg_.pin_all ? "rdma-pin-all" : "dynamic registration";
    if (!cfg_.pin_all && cfg_.pin_limit != 0) mode += ", rdma-pin-limit " + vmm::format_size(cfg_.pin_limit);
    size_t n = channels_.count();
    summary_ = fmt::format("{}: {}, {} chunks, {} channel{}", first().describe, mode, vmm::format_size(geo_.size()), n,
                           n == 1 ? "" : "s");
    if (channels_.has_postcopy()) {
        summary_ += (agreed_ & kCapPostcopyReadPush) != 0 ? " and a postcopy channel (faults and the push by RDMA READ)"
                    : (agreed_ & kCapPostcopyRead) != 0   ? " and a postcopy channel (faults by RDMA READ)"
                                                          : " and a postcopy channel";
    }
    if (authenticated()) {
        summary_ += ", authenticated (TLS 1.3 control channel, RAM sums keyed from it";
        const char* postcopy = (agreed_ & kCapPostcopyRead) != 0
                                   ? ", the postcopy channel's messages, writes and pages read by RDMA READ tagged)"
                                   : ", the postcopy channel's messages and writes tagged)";
        summary_ += channels_.has_postcopy() ? postcopy : ")";
    }
    if ((agreed_ & kExtensionCaps) == 0) summary_ += ", base protocol (no vmm extension agreed)";
    if (!note.empty()) summary_ += " (" + note + ")";
}

}  // namespace rdma_migrate

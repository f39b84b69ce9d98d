#include "connection.h"

#include <fmt/format.h>

#include "trace.h"
#include "vmm/common/units.h"

namespace rdma_migrate {

namespace {
// The exporter label (RFC 8446 §7.5) of the RAM sums' key: both sides must use this one.
constexpr const char* kSumsKeyLabel = "EXPORTER-vmm-rdma-ram-sums";
}  // namespace

Connection::Connection(std::unique_ptr<Endpoint> ep, std::unique_ptr<ControlChannel> ctl, SessionConfig cfg,
                       ChunkGeometry g, uint32_t agreed, std::function<Status()> blocks_requested)
    : ep_(std::move(ep)), ctl_(std::move(ctl)), cfg_(std::move(cfg)), geo_(g), agreed_(agreed),
      max_entries_((agreed & kCapBatch) != 0 ? kMaxRepeat : 1), steps_(ep_->steps), summary_(ep_->describe),
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

void Connection::hang_up() {
    for (Endpoint* e : channels()) e->hang_up();
}

void Connection::cut() {
    for (Endpoint* e : channels())
        if (e->id) (void)rdma_disconnect(e->id.get());
}

std::vector<Endpoint*> Connection::channels() const {
    std::vector<Endpoint*> all{ep_.get()};
    for (const auto& e : extra_) all.push_back(e.get());
    if (postcopy_ep_) all.push_back(postcopy_ep_.get());
    return all;
}

Endpoint& Connection::set_postcopy_channel(std::unique_ptr<Endpoint> ep) {
    postcopy_ep_ = std::move(ep);
    return *postcopy_ep_;
}

// rdma-pin-all: every RAM block registered whole during setup, on both sides (as QEMU does),
// not inside the bulk round: pinning all of RAM is setup work, and the rounds that follow
// register nothing. `use`: remote write on the destination; local read only on the source,
// which never registers memory for remote access.
Status Connection::pin_blocks(Use use) {
    auto mrs = ep_->memory().register_blocks(cfg_.blocks, use);
    if (!mrs) return mrs.error();
    pinned_ = std::move(*mrs);
    for (const auto& b : cfg_.blocks) trace("{}: RAM block '{}' registered for rdma-pin-all ({} bytes)", side(), b.name, b.size);
    return {};
}

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
    return std::optional<PcKeys>{std::move(*keys)};
}

void Connection::summarize(const std::string& note) {
    std::string mode = cfg_.pin_all ? "rdma-pin-all" : "dynamic registration";
    if (!cfg_.pin_all && cfg_.pin_limit != 0) mode += ", rdma-pin-limit " + vmm::format_size(cfg_.pin_limit);
    size_t n = 1 + extra_.size();
    summary_ = fmt::format("{}: {}, {} chunks, {} channel{}", ep_->describe, mode, vmm::format_size(geo_.size()), n,
                           n == 1 ? "" : "s");
    if (postcopy_ep_) summary_ += " and a postcopy channel";
    if (authenticated()) {
        summary_ += ", authenticated (TLS 1.3 control channel, RAM sums keyed from it";
        summary_ += postcopy_ep_ ? ", the postcopy channel's messages and writes tagged)" : ")";
    }
    if ((agreed_ & kExtensionCaps) == 0) summary_ += ", base protocol (no vmm extension agreed)";
    if (!note.empty()) summary_ += " (" + note + ")";
}

}  // namespace rdma_migrate

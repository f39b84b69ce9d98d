#include "vmm/migration/session/source_core.h"

#include "vmm/common/elapsed.h"
#include "vmm/common/log.h"
#include "vmm/migration/precopy/plan.h"

namespace vmm::migration {

SourceCore::SourceCore(machine::Machine& m, Transport& t, Uri u, Options o, std::shared_ptr<const LiveSettings> l,
                       stream::CancelToken c, StatusFn s)
    : machine(m), transport(&t), uri(std::move(u)), options(std::move(o)), live(std::move(l)), cancel(std::move(c)),
      on_status(std::move(s)) {
    stats.uri = uri.text;
    stats.ram.total = m.memory().total_size();
}

void SourceCore::set_status(MigrationStatus s) {
    {
        std::lock_guard lock(mutex);
        if (stats.status == s) return;
        if (stats.status == MigrationStatus::cancelling && s != MigrationStatus::cancelled) return;
        stats.status = s;
    }
    if (on_status && options.caps.events) on_status(s);
}

void SourceCore::publish(const RamStats& work) {
    std::lock_guard lock(mutex);
    RamStats& r = stats.ram;
    r.transferred = work.transferred;
    r.in_flight = work.in_flight;
    r.duplicate = work.duplicate;
    r.normal = work.normal;
    r.normal_bytes = work.normal_bytes;
    r.skipped_unpopulated = work.skipped_unpopulated;
    r.bulk_to_send = work.bulk_to_send;
    published_at = SteadyClock::now();
    r.remaining = work.remaining;
    if (!stats.ways.empty()) stats.ways.back().bytes = work.transferred - way_began_at;
}

void SourceCore::update_remaining(uint64_t dirty_pages) {
    std::lock_guard lock(mutex);
    stats.ram.remaining = dirty_pages * memory::kPageSize;
}

Result<SourceCore::Bitmaps> SourceCore::take_dirty() {
    if (auto s = machine.dirty_rate().sync_now(); !s) return s.error();
    Bitmaps out;
    for (const auto& b : machine.memory().blocks()) {
        out.emplace_back();
        b->dirty().take(out.back());
    }
    std::lock_guard lock(mutex);
    ++stats.ram.dirty_sync_count;
    return out;
}

void SourceCore::release_throttles() {
    machine.vcpus().set_throttle(0);
    if (!dirty_limited) return;
    dirty_limited = false;
    if (auto limiter = machine.dirty_limiter()) {
        (void)(*limiter)->set(std::nullopt, 0);
        log::info("x-deadline: the vCPUs' dirty limits lifted");
    }
}

void SourceCore::give_guest_back() {
    release_throttles();
    if (paused_by_us && was_running) (void)machine.run().resume();
    paused_by_us = false;
}

void SourceCore::set_link_aside(std::string why) {
    std::lock_guard lock(mutex);
    stats.error = std::move(why);
    if (conn) {
        (void)conn->cut();
        broken.push_back(std::move(conn));
    }
}

ResumeTo SourceCore::next_way(bool& asked, bool fallback_turn) {
    std::lock_guard lock(mutex);
    asked = resume_to.has_value();
    if (asked) return *resume_to;
    return fallback_turn && fallback ? *fallback : ResumeTo{transport, uri};
}

RamSaver::Verify SourceCore::verify_for(Connection& c) const {
    SourceRamChannel* channel = c.source_ram();
    if (summer.keyed() && channel != nullptr) return RamSaver::Verify::channel_sums;
    if (!sums_on()) return RamSaver::Verify::off;
    if (channel == nullptr) return RamSaver::Verify::summed;
    if (channel->verifies()) return RamSaver::Verify::off;
    return channel->carries_sums() ? RamSaver::Verify::channel_sums : RamSaver::Verify::round_sums;
}

void SourceCore::new_way(const std::string& way, uint64_t sent) {
    std::lock_guard lock(mutex);
    if (!stats.ways.empty()) stats.ways.back().bytes = sent - way_began_at;
    stats.ways.push_back({way, 0});
    way_began_at = sent;
}

void SourceCore::count_way(uint64_t sent) {
    std::lock_guard lock(mutex);
    if (!stats.ways.empty()) stats.ways.back().bytes = sent - way_began_at;
}

void SourceCore::wait_before_next_try() {
    std::unique_lock lock(mutex);
    resume_cv.wait_for(lock, kReconnectEvery);
}

void SourceCore::link_back(std::chrono::steady_clock::time_point since) {
    std::lock_guard lock(mutex);
    ++stats.precopy_resumes;
    stats.precopy_paused_ms += ms_between(since, SteadyClock::now());
    stats.error.clear();
    resume_to.reset();
    broken.clear();
}

// The link's rate measured at the last round's end (during the first round, what had arrived
// when it was last published over the time it took: a fifth of a second at least, or the first
// figures say little), the guest's dirtying from the dirty-rate sampler's last period, and what
// is left: in the bulk round what it has still to send (the pages never touched cost the link
// nothing; the model adds what the guest dirties meanwhile as the next round), after it what is
// dirty.
EtaFacts SourceCore::precopy_facts(const MigrationStats& s) const {
    double active_s = std::chrono::duration<double>(published_at - active_since).count();
    double link = s.ram.mbps > 0 ? s.ram.mbps * 1e6 / 8 : (active_s >= 0.2 ? s.ram.transferred / active_s : 0);
    memory::DirtyRate rate = machine.dirty_rate().rate();
    double dirty = rate.pages_per_second * memory::kPageSize;
    uint64_t left = s.rounds == 0 ? s.ram.bulk_to_send : s.ram.remaining;
    EtaFacts f{left, link, dirty, static_cast<double>(options.params.downtime_limit_ms), s.handover_estimate_ms};
    // A guest keeping to a hot set leaves no more than that dirty after a round (as the plan takes it).
    f.hot_set_bytes = static_cast<double>(rate.hot_set_pages * memory::kPageSize);
    return f;
}

std::vector<uint64_t> pages_per_block(const memory::GuestMemory& mem) {
    std::vector<uint64_t> pages;
    for (const auto& b : mem.blocks()) pages.push_back(b->pages());
    return pages;
}

}  // namespace vmm::migration

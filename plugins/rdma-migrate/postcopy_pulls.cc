// The destination's own push (kCapPostcopyReadPush; postcopy_channel.h): the runs a PULL names,
// read by RDMA READ into the pull slots at the pace it says, by the receiving thread
// (next_with_reads), which holds END back until the last piece is placed.
#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>

#include "postcopy_channel.h"
#include "trace.h"
#include "vmm/common/log.h"
#include "vmm/common/units.h"

namespace rdma_migrate {

// PULL (kCapPostcopyReadPush): runs of pages the source's push held back, each inside regions
// a KEYS told, queued in pieces for this side's own READs at the pace it says. The source will
// answer no request for these pages (it took them for the push), so requests for them are
// free again, as when a push lands.
Status PostcopyDestination::take_pulls(const PcImmediate& imm, const uint8_t* slot) {
    if (!pulls_) return Error("RDMA postcopy: PULL from a source that did not agree to the destination reading its push");
    auto pulls = decode_pc_pulls({slot, kPcSlotSize}, imm.pages);
    if (!pulls) return pulls.error();
    if (keys_)
        if (auto s = open_pc_keys({slot, kPcSlotSize}, pc_pulls_size(imm.pages), keys_->writes, PcKind::pull); !s) return s;
    pace_.set_rate(pulls->rate);
    for (const PcPullRun& run : pulls->runs) {
        if (auto s = check_pc_range(blocks_, run.block, run.offset, run.pages); !s) return s;
        if (pull_queue_.size() > (1u << 22)) return Error("RDMA postcopy: more than 4 million PULL pieces queued");
        for (uint64_t done = 0; done < run.pages;) {
            uint64_t at = run.offset + done * kPcPage;
            auto from = readable(run.block, at);
            if (!from) {
                return Error(fmt::format("RDMA postcopy PULL: block {} offset {:#x} lies in no region a KEYS told", run.block, at));
            }
            auto n = static_cast<uint32_t>(std::min<uint64_t>({run.pages - done, kPcMaxPages, from->room / kPcPage}));
            pull_queue_.push_back({run.block, n, at, *from});
            done += n;
        }
        free_asked(run.block, run.offset, run.pages);
        trace("destination: PULL: block {} offset {:#x}, {} pages", run.block, run.offset, run.pages);
    }
    return {};
}

bool PostcopyDestination::pulling() const {
    return !pull_queue_.empty() || std::any_of(pulling_.begin(), pulling_.end(), [](const auto& p) { return p.has_value(); });
}

// When the next queued piece may be read: at once with a slot free and the pace allowing;
// never (max) without a piece or a free slot.
std::chrono::steady_clock::time_point PostcopyDestination::next_pull_at() const {
    bool free = std::find(pulling_.begin(), pulling_.end(), std::nullopt) != pulling_.end();
    if (pull_queue_.empty() || !free) return std::chrono::steady_clock::time_point::max();
    return pace_.when(uint64_t{pull_queue_.front().pages} * kPcPage, std::chrono::steady_clock::now());
}

// The front piece, less what was placed since it was queued (a fault's READ, an answer): what
// this side still lacks of it (mincore on its own guest RAM: a page dropped at the switch is
// not resident until placed), or nothing; all of it where the kernel cannot say.
void PostcopyDestination::trim_front_pull() {
    while (!pull_queue_.empty()) {
        Pull p = pull_queue_.front();
        std::vector<uint8_t> here(p.pages, 0);
        if (::mincore(blocks_[p.block].host + p.offset, uint64_t{p.pages} * kPcPage, here.data()) != 0) return;
        auto lacking = pull_pieces(here, kPcMaxPages);
        if (lacking.size() == 1 && lacking[0].pages == p.pages) return;
        pull_queue_.pop_front();
        skipped_pages_ += p.pages;
        for (auto it = lacking.rbegin(); it != lacking.rend(); ++it) {
            pull_queue_.push_front({p.block, it->pages, p.offset + it->first * kPcPage, p.from.after(it->first)});
            skipped_pages_ -= it->pages;
        }
    }
}

// The READs of as many queued pieces as there are free pull slots and the pace allows.
Status PostcopyDestination::post_pulls() {
    for (size_t i = 0; i < pulling_.size() && !pull_queue_.empty(); ++i) {
        if (pulling_[i]) continue;
        trim_front_pull();
        if (pull_queue_.empty()) return {};
        auto now = std::chrono::steady_clock::now();
        uint64_t bytes = uint64_t{pull_queue_.front().pages} * kPcPage;
        if (pace_.when(bytes, now) > now) return {};
        Pull p = pull_queue_.front();
        pull_queue_.pop_front();
        pace_.took(bytes, now);
        pulling_[i] = p;
        trace("destination: pull READ into slot {}: block {} offset {:#x}, {} pages", pull_slot(i), p.block, p.offset, p.pages);
        if (auto s = post_read(pull_slot(i), p.from, p.pages); !s) return s;
    }
    return {};
}

void PostcopyDestination::log_pulled() const {
    vmm::log::info("x-rdma-postcopy-read-push: this side read {} pages of the push itself in {} RDMA READs, at {} ({} "
                   "pages it had by then left unread)",
                   pulled_pages_.load(), pull_reads_.load(),
                   pace_.rate() == 0 ? std::string("the link's pace") : vmm::format_size(pace_.rate()) + "/s", skipped_pages_);
}

}  // namespace rdma_migrate

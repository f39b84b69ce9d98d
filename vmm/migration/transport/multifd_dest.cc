// Destination lanes: serving a round starts one thread per lane, each reading its lane's
// records straight into guest RAM until that lane's ROUND_END. Every record is checked as the
// main stream's are (read_record) before it touches memory. The first lane to fail shuts every
// lane's socket down, so the others stop at once instead of waiting for the silence timeout.
#include <fmt/format.h>
#include <sys/socket.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include "vmm/common/thread_name.h"
#include "vmm/memory/ram_block.h"
#include "vmm/migration/transport/multifd.h"
#include "vmm/migration/transport/landing.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

namespace {

class DestLanes final : public DestRamChannel {
public:
    DestLanes(Lanes lanes, std::vector<RamBlockView> blocks)
        : lanes_(std::move(lanes)), views_(std::move(blocks)) {
        for (const auto& b : views_) infos_.push_back({b.name, b.guest_addr, b.size});
    }

    Status serve_round(uint32_t round) override {
        first_error_.reset();
        broke_ = false;
        {
            std::vector<std::jthread> threads;
            for (size_t i = 0; i < lanes_.size(); ++i) {
                threads.emplace_back([this, i, round] {
                    name_this_thread(fmt::format("multifd-recv{}", i));
                    if (auto s = serve_lane(i, round); !s) fail(i, s.error());
                });
            }
        }  // joins every lane
        if (first_error_) return *first_error_;
        return {};
    }

    ChannelCounts counts() const override { return {pages_.load(), zero_pages_.load(), bytes_.load()}; }
    Status verify_with(RamVerifier* verifier) override {
        verifier_ = verifier;  // before the first round: the lanes' threads do not run yet
        return {};
    }
    bool on_landed(LandedFn fn) override {
        landed_ = std::move(fn);  // between rounds, as verify_with
        return true;
    }
    void count_from(const ChannelCounts& before) override {
        pages_ = before.pages;
        zero_pages_ = before.zero_pages;
        bytes_ = before.bytes;
    }
    // The first lane to fail decides: its link broke, or its peer said something wrong (the
    // others' failures follow from its shutting them down).
    bool link_broke() const override { return broke_.load(); }
    void cut() override {
        for (auto& l : lanes_) (void)l->shutdown();
    }

private:
    Status serve_lane(size_t lane, uint32_t round) {
        auto& in = *lanes_[lane];
        for (;;) {
            auto r = read_record(in, infos_, static_cast<uint32_t>(memory::kPageSize));
            if (!r) return r.error().context(fmt::format("multifd lane {}", lane));
            switch (r->type) {
                case RecordType::pages:
                case RecordType::pages_summed: {
                    auto s = land_pages(in, *r, views_[r->block].host + r->offset, verifier_);
                    if (!s) return s.error().context(fmt::format("multifd lane {}", lane));
                    pages_ += r->length / memory::kPageSize;
                    bytes_ += r->length;
                    if (landed_) landed_(r->block, r->offset / memory::kPageSize, r->length / memory::kPageSize, round);
                    break;
                }
                case RecordType::zero:
                    land_zero(*r, views_[r->block].host + r->offset, verifier_);
                    zero_pages_ += r->length / memory::kPageSize;
                    if (landed_) landed_(r->block, r->offset / memory::kPageSize, r->length / memory::kPageSize, round);
                    break;
                case RecordType::round_end:
                    if (r->round != round) {
                        return Error(fmt::format("multifd lane {}: end of round {} inside round {}", lane, r->round,
                                                 round));
                    }
                    return {};
                default:
                    return Error(fmt::format("multifd lane {}: record type {:#x} does not belong on a lane", lane,
                                             static_cast<unsigned>(r->type)));
            }
        }
    }

    void fail(size_t lane, Error e) {
        std::lock_guard lock(mu_);
        if (first_error_) return;  // the others fail because of this one
        first_error_ = std::move(e);
        broke_ = lanes_[lane]->link_broke();
        for (auto& l : lanes_) (void)l->shutdown();
    }

    Lanes lanes_;
    std::vector<RamBlockView> views_;
    std::vector<BlockInfo> infos_;
    RamVerifier* verifier_ = nullptr;
    LandedFn landed_;
    std::atomic<bool> broke_{false};
    std::mutex mu_;
    std::optional<Error> first_error_;
    std::atomic<uint64_t> pages_{0}, zero_pages_{0}, bytes_{0};
};

}  // namespace

std::unique_ptr<DestRamChannel> make_dest_lanes(Lanes lanes, std::vector<RamBlockView> blocks) {
    return std::make_unique<DestLanes>(std::move(lanes), std::move(blocks));
}

}  // namespace vmm::migration

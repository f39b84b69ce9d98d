// Source lanes: each lane is a worker thread with a bounded queue of records to send. The
// RAM saver's thread splits page runs into records and deals them out in turn; a record
// refers to guest RAM (nothing is copied into the queue), which the lane sends by write_ram
// (spliced where the kernel allows).
#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "vmm/common/thread_name.h"
#include "vmm/migration/transport/multifd.h"
#include "vmm/migration/wire/page_sums.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

namespace {

struct Job {
    Record record;                     // PAGES, ZERO or ROUND_END
    std::span<const uint8_t> ram = {};  // PAGES: the guest RAM it carries
};

class Lane {
public:
    explicit Lane(std::unique_ptr<stream::ByteStream> stream) : stream_(std::move(stream)), thread_([this] { run(); }) {}
    Lane(const Lane&) = delete;
    Lane& operator=(const Lane&) = delete;
    ~Lane() {
        {
            std::lock_guard lock(mu_);
            stopping_ = true;
        }
        more_.notify_all();
        (void)stream_->shutdown();  // a send blocked on a stuck peer returns now
        thread_.join();
    }

    // Queues a job; waits while the queue is full. Fails once the lane has failed.
    Status post(Job job) {
        std::unique_lock lock(mu_);
        room_.wait(lock, [&] { return error_ || (queued_bytes_ < kMaxQueuedBytes && queue_.size() < kMaxJobs); });
        if (error_) return *error_;
        queued_bytes_ += job.ram.size();
        queue_.push_back(job);
        more_.notify_one();
        return {};
    }
    // Waits until every queued job is sent (or the lane failed).
    Status drain() {
        std::unique_lock lock(mu_);
        room_.wait(lock, [&] { return error_ || (queue_.empty() && !busy_); });
        if (error_) return *error_;
        return {};
    }
    std::optional<Error> failure() {
        std::lock_guard lock(mu_);
        return error_;
    }
    // Whether it failed because its connection did (not because of what it was given).
    bool link_broke() const { return stream_->link_broke(); }
    // RAM queued here and not yet handed to the connection.
    uint64_t queued() {
        std::lock_guard lock(mu_);
        return queued_bytes_;
    }
    void cut() { (void)stream_->shutdown(); }

private:
    static constexpr size_t kMaxQueuedBytes = 16u << 20;
    static constexpr size_t kMaxJobs = 1024;

    void run() {
        name_this_thread("multifd-send");
        for (;;) {
            Job job;
            {
                std::unique_lock lock(mu_);
                more_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
                if (stopping_) return;
                job = queue_.front();
                queue_.pop_front();
                busy_ = true;
            }
            Status s = send(job);
            std::lock_guard lock(mu_);
            busy_ = false;
            queued_bytes_ -= job.ram.size();
            if (!s && !error_) error_ = s.error();
            if (error_) {  // nothing more goes out on this lane; post() and drain() report why
                queue_.clear();
                queued_bytes_ = 0;
            }
            room_.notify_all();
        }
    }

    Status send(const Job& job) {
        // The checksum is taken here, on the lane's thread, right before the pages go out: the
        // lanes hash in parallel as they send.
        auto header = encode_record(job.record);
        if (job.record.type == RecordType::pages_summed) append_page_sums(header, job.ram);
        if (job.record.type == RecordType::pages || job.record.type == RecordType::pages_summed) {
            return stream_->write_ram(header, job.ram);
        }
        if (auto s = stream_->write(header); !s) return s;
        return job.record.type == RecordType::round_end ? stream_->flush() : Status{};
    }

    std::unique_ptr<stream::ByteStream> stream_;
    std::mutex mu_;
    std::condition_variable more_, room_;
    std::deque<Job> queue_;
    size_t queued_bytes_ = 0;
    bool busy_ = false;
    bool stopping_ = false;
    std::optional<Error> error_;
    std::thread thread_;  // last: starts after every other member exists
};

class SourceLanes final : public SourceRamChannel {
public:
    SourceLanes(Lanes streams, std::vector<RamBlockView> blocks, bool verify)
        : blocks_(std::move(blocks)), verify_(verify) {
        for (auto& s : streams) lanes_.push_back(std::make_unique<Lane>(std::move(s)));
    }

    Status begin_round(uint32_t round) override {
        round_ = round;
        for (auto& l : lanes_) {
            if (auto e = l->failure()) return *e;
        }
        return {};
    }

    Status send(uint32_t block, uint64_t offset, uint64_t length) override {
        if (auto s = check(block, offset, length); !s) return s;
        for (uint64_t done = 0; done < length; done += kMaxPagesRecord) {
            Job job;
            job.record.type = verify_ ? RecordType::pages_summed : RecordType::pages;
            job.record.block = block;
            job.record.offset = offset + done;
            job.record.length = std::min<uint64_t>(kMaxPagesRecord, length - done);
            job.ram = {blocks_[block].host + job.record.offset, job.record.length};
            if (auto s = next().post(job); !s) return s;
        }
        return {};
    }

    Status send_zero(uint32_t block, uint64_t offset, uint64_t length) override {
        if (auto s = check(block, offset, length); !s) return s;
        Job job;
        job.record.type = RecordType::zero;
        job.record.block = block;
        job.record.offset = offset;
        job.record.length = length;
        return next().post(job);
    }

    bool verifies() const override { return verify_; }
    // A lane's records land whole or not at all, and the destination says which did.
    bool resumable() const override { return true; }
    // What the lanes still queue has not gone (a broken link loses it: it goes again).
    uint64_t in_flight() const override {
        uint64_t n = 0;
        for (const auto& l : lanes_) n += l->queued();
        return n;
    }
    bool link_broke() const override {
        return std::any_of(lanes_.begin(), lanes_.end(), [](const auto& l) { return l->link_broke(); });
    }
    void cut() override {
        for (auto& l : lanes_) l->cut();
    }

    Status end_round() override {
        for (auto& l : lanes_) {
            Job job;
            job.record.type = RecordType::round_end;
            job.record.round = round_;
            if (auto s = l->post(job); !s) return s;
        }
        for (auto& l : lanes_) {
            if (auto s = l->drain(); !s) return s;
        }
        return {};
    }

private:
    Lane& next() { return *lanes_[next_++ % lanes_.size()]; }
    Status check(uint32_t block, uint64_t offset, uint64_t length) const {
        if (block >= blocks_.size() || offset > blocks_[block].size || length > blocks_[block].size - offset) {
            return Error("multifd: a page run outside guest RAM (a bug in the RAM saver)");
        }
        return {};
    }

    std::vector<RamBlockView> blocks_;
    bool verify_;
    std::vector<std::unique_ptr<Lane>> lanes_;
    size_t next_ = 0;
    uint32_t round_ = 0;
};

}  // namespace

std::unique_ptr<SourceRamChannel> make_source_lanes(Lanes lanes, std::vector<RamBlockView> blocks, bool verify) {
    return std::make_unique<SourceLanes>(std::move(lanes), std::move(blocks), verify);
}

}  // namespace vmm::migration

#include "vmmd/runtime/vmm_events.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <vector>

#include "vmm/monitor/dispatcher.h"
#include "vmm/monitor/server.h"

namespace vmmd {
namespace {

using vmm::monitor::Json;

// A vmm's QMP side as vmm serves it (its Dispatcher and MonitorServer), without a machine: the
// test emits the events a vmm would.
class VmmEventsTest : public ::testing::Test {
protected:
    std::string dir_ = "/tmp/vmmd-events-" + std::to_string(::getpid());
    std::string socket_ = dir_ + "/qmp";
    vmm::monitor::Dispatcher dispatcher_;
    std::unique_ptr<vmm::monitor::MonitorServer> server_;
    std::mutex mutex_;
    std::condition_variable arrived_;
    std::vector<Json> got_;

    void SetUp() override {
        std::filesystem::create_directories(dir_);
        auto s = vmm::monitor::MonitorServer::create(dispatcher_, vmm::monitor::Protocol::qmp);
        ASSERT_TRUE(s) << s.error().message();
        server_ = std::move(*s);
        ASSERT_TRUE(server_->listen_unix(socket_));
    }
    void TearDown() override {
        server_.reset();
        std::filesystem::remove_all(dir_);
    }
    VmmEvents::Sink sink() {
        return [this](const Json& e) {
            std::lock_guard lock(mutex_);
            got_.push_back(e);
            arrived_.notify_all();
        };
    }
    // Waits (up to a minute) for `n` events to have arrived.
    bool arrived(size_t n) {
        std::unique_lock lock(mutex_);
        return arrived_.wait_for(lock, std::chrono::minutes(1), [&] { return got_.size() >= n; });
    }
};

TEST_F(VmmEventsTest, EachEventReachesTheSinkInTheVmmsOrder) {
    auto events = VmmEvents::open(socket_, sink());
    ASSERT_TRUE(events) << events.error().message();
    dispatcher_.emit("MIGRATION", Json{{"status", "active"}});
    dispatcher_.emit("MIGRATION", Json{{"status", "precopy-paused"}});
    dispatcher_.emit("STOP");
    ASSERT_TRUE(arrived(3));
    std::lock_guard lock(mutex_);
    EXPECT_EQ(vmm::monitor::str(got_[0], "event"), "MIGRATION");
    EXPECT_EQ(vmm::monitor::str(vmm::monitor::child(got_[1], "data"), "status"), "precopy-paused");
    EXPECT_EQ(vmm::monitor::str(got_[2], "event"), "STOP");
    EXPECT_TRUE(vmm::monitor::int_member(vmm::monitor::child(got_[2], "timestamp"), "seconds")) << got_[2].dump();
}

TEST_F(VmmEventsTest, EndsWhetherTheVmmGoesFirstOrVmmdStopsWatching) {
    {
        auto quiet = VmmEvents::open(socket_, sink());
        ASSERT_TRUE(quiet) << quiet.error().message();
    }  // a vmm that says nothing for an hour does not hold its destruction
    auto events = VmmEvents::open(socket_, sink());
    ASSERT_TRUE(events) << events.error().message();
    server_->stop();  // the vmm ends: its sessions close
    dispatcher_.emit("SHUTDOWN");
    events->reset();
    std::lock_guard lock(mutex_);
    EXPECT_TRUE(got_.empty()) << got_.size() << " events after the vmm closed";
}

TEST_F(VmmEventsTest, ASocketWithNoVmmIsSaidInOneLine) {
    auto events = VmmEvents::open(dir_ + "/nothing", sink(), std::chrono::milliseconds(100));
    ASSERT_FALSE(events);
    EXPECT_NE(events.error().message().find("the vmm's QMP socket for its events"), std::string::npos) << events.error().message();
}

}  // namespace
}  // namespace vmmd

#include "vmmd/daemon/events.h"

#include <gtest/gtest.h>
#include <libvirt/libvirt.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/vmmd/daemon/event_client.h"

namespace vmmd {
namespace {

// One connection to the hub over a socketpair: what the server does for a client.
class EventHubTest : public ::testing::Test {
protected:
    EventHub hub_;
    vmm::UniqueFd ours_, theirs_;
    std::vector<rpc::Procedure> procs_ = hub_.procedures();
    rpc::Caller caller_;

    void SetUp() override {
        int sv[2];
        ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        ours_ = vmm::UniqueFd(sv[0]);
        theirs_ = vmm::UniqueFd(sv[1]);
        caller_.opened = true;
        caller_.connection = 5;
        hub_.connected(5, std::make_shared<Outbox>(ours_.get()));
    }
    rpc::Reply call(int32_t number, const xdr::Writer& w) {
        xdr::Reader r(w.bytes());
        for (auto& p : procs_)
            if (p.number == number) return p.handler(caller_, r);
        ADD_FAILURE() << "no procedure " << number;
        return {};
    }
    rpc::Reply register_lifecycle(std::optional<Uuid> only, int32_t event_id = VIR_DOMAIN_EVENT_ID_LIFECYCLE) {
        xdr::Writer w;
        w.i32(event_id);
        w.boolean(only.has_value());
        if (only) {
            w.string("x");
            w.fixed_opaque(*only);
            w.i32(-1);
        }
        return call(316, w);
    }
    std::optional<rpc::Message> next_message() { return test::next_event_message(theirs_.get()); }
    // Registers a callback for `event_id` (all domains) and returns its id.
    int32_t registered(int32_t event_id) {
        rpc::Reply r = register_lifecycle(std::nullopt, event_id);
        EXPECT_FALSE(r.error) << r.error->message;
        xdr::Reader ret(r.payload);
        auto id = ret.i32();
        return id ? *id : -1;
    }
    // The next message must be event `proc` to `callback` about domain `name` running as `id`:
    // kept in last_, and a reader returned at what follows the domain.
    xdr::Reader expect_event(int32_t proc, int32_t callback, const std::string& name, int32_t id) {
        auto m = next_message();
        EXPECT_TRUE(m);
        last_ = m.value_or(rpc::Message{});
        EXPECT_EQ(last_.header.procedure, proc);
        xdr::Reader body(last_.payload);
        auto to = body.i32();
        EXPECT_TRUE(to && *to == callback);
        auto named = body.string(100);
        EXPECT_TRUE(named && *named == name);
        Uuid u{};
        EXPECT_TRUE(body.fixed_opaque(u));
        auto running_as = body.i32();
        EXPECT_TRUE(running_as && *running_as == id);
        return body;
    }
    rpc::Message last_;
    static DomainDef domain(const std::string& name, uint8_t tag) {
        DomainDef d;
        d.name = name;
        d.uuid[0] = tag;
        return d;
    }
};

TEST_F(EventHubTest, ARegisteredCallbackGetsLifecycleMessages) {
    rpc::Reply r = register_lifecycle(std::nullopt);
    ASSERT_FALSE(r.error) << r.error->message;
    xdr::Reader ret(r.payload);
    int32_t callback = *ret.i32();
    hub_.lifecycle(domain("a", 1), 4, {VIR_DOMAIN_EVENT_STARTED, VIR_DOMAIN_EVENT_STARTED_BOOTED});
    hub_.lifecycle(domain("a", 1), 4, {VIR_DOMAIN_EVENT_STOPPED, VIR_DOMAIN_EVENT_STOPPED_CRASHED});
    for (int expected : {VIR_DOMAIN_EVENT_STARTED, VIR_DOMAIN_EVENT_STOPPED}) {
        auto m = next_message();
        ASSERT_TRUE(m);
        EXPECT_EQ(m->header.type, rpc::Type::message);
        EXPECT_EQ(m->header.procedure, 318);
        xdr::Reader body(m->payload);
        EXPECT_EQ(*body.i32(), callback);
        EXPECT_EQ(*body.string(100), "a");
        Uuid u{};
        ASSERT_TRUE(body.fixed_opaque(u));
        EXPECT_EQ(u, domain("a", 1).uuid);
        EXPECT_EQ(*body.i32(), expected == VIR_DOMAIN_EVENT_STOPPED ? -1 : 4) << "a stopped domain has no id";
        EXPECT_EQ(*body.i32(), expected);
        EXPECT_TRUE(body.i32());
        EXPECT_EQ(body.left(), 0u);
    }
    EXPECT_FALSE(next_message());
}

TEST_F(EventHubTest, MigrationIterationsGoToTheirCallbacksOnly) {
    ASSERT_FALSE(register_lifecycle(std::nullopt).error);  // hears lifecycle events only
    int32_t callback = registered(VIR_DOMAIN_EVENT_ID_MIGRATION_ITERATION);
    hub_.migration_iteration(domain("a", 1), 7, 2);
    // remote_domain_event_callback_migration_iteration_msg
    xdr::Reader body = expect_event(359, callback, "a", 7);
    EXPECT_EQ(*body.i32(), 2) << "the iteration";
    EXPECT_EQ(body.left(), 0u);
    EXPECT_FALSE(next_message()) << "the lifecycle callback heard a migration iteration";
}

TEST_F(EventHubTest, AJobCompletedEventCarriesTheJobsStatistics) {
    int32_t callback = registered(VIR_DOMAIN_EVENT_ID_JOB_COMPLETED);
    hub_.job_completed(domain("a", 1), 3, {{VIR_DOMAIN_JOB_OPERATION, int32_t{4}}, {VIR_DOMAIN_JOB_MEMORY_TOTAL, uint64_t{1} << 26}});
    xdr::Reader body = expect_event(363, callback, "a", 3);  // remote_domain_event_callback_job_completed_msg
    auto params = rpc::decode_typed_params(body);
    ASSERT_TRUE(params) << params.error().message();
    ASSERT_EQ(params->size(), 2u);
    EXPECT_EQ((*params)[1].name, VIR_DOMAIN_JOB_MEMORY_TOTAL);
    EXPECT_EQ((*params)[1].value, rpc::TypedValue{uint64_t{1} << 26});
    EXPECT_EQ(body.left(), 0u);
}

TEST_F(EventHubTest, ACallbackForOneDomainHearsOnlyThatOne) {
    ASSERT_FALSE(register_lifecycle(domain("b", 2).uuid).error);
    hub_.lifecycle(domain("a", 1), 1, {VIR_DOMAIN_EVENT_STARTED, 0});
    EXPECT_FALSE(next_message());
    hub_.lifecycle(domain("b", 2), 2, {VIR_DOMAIN_EVENT_STARTED, 0});
    EXPECT_TRUE(next_message());
}

TEST_F(EventHubTest, DeregisteredOrDisconnectedHearsNothing) {
    rpc::Reply r = register_lifecycle(std::nullopt);
    xdr::Reader ret(r.payload);
    xdr::Writer w;
    w.i32(*ret.i32());
    EXPECT_FALSE(call(317, w).error);
    EXPECT_TRUE(call(317, w).error) << "the same callback twice";
    hub_.lifecycle(domain("a", 1), 1, {VIR_DOMAIN_EVENT_STARTED, 0});
    EXPECT_FALSE(next_message());
    ASSERT_FALSE(register_lifecycle(std::nullopt).error);
    hub_.disconnected(5);
    hub_.lifecycle(domain("a", 1), 1, {VIR_DOMAIN_EVENT_STARTED, 0});
    EXPECT_FALSE(next_message());
}

TEST_F(EventHubTest, BadRegistrationsAreRefused) {
    xdr::Writer unknown;
    unknown.i32(1000);
    unknown.boolean(false);
    rpc::Reply r = call(316, unknown);
    ASSERT_TRUE(r.error);
    EXPECT_NE(r.error->message.find("unsupported event ID 1000"), std::string::npos);
    xdr::Writer truncated;
    truncated.i32(0);
    EXPECT_TRUE(call(316, truncated).error);
    for (size_t i = 0; i < EventHub::kMaxCallbacksPerConnection; ++i) ASSERT_FALSE(register_lifecycle(std::nullopt).error);
    EXPECT_TRUE(register_lifecycle(std::nullopt).error) << "callbacks are bounded";
}

}  // namespace
}  // namespace vmmd

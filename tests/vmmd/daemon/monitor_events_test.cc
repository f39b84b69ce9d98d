#include "vmmd/daemon/monitor_events.h"

#include <gtest/gtest.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <variant>

#include "tests/vmmd/daemon/event_client.h"

namespace vmmd {
namespace {

using vmm::monitor::Json;

// One read-write connection to the hub over a socketpair, calls going through a Dispatcher as the
// server's do (so its access rules apply).
class MonitorEventHubTest : public ::testing::Test {
protected:
    MonitorEventHub hub_;
    vmm::UniqueFd ours_, theirs_;
    rpc::Dispatcher d_{hub_.procedures()};
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
    // The QEMU program's procedure `proc`: the reply's payload, or its error.
    std::pair<std::vector<uint8_t>, std::optional<rpc::RemoteError>> call(int32_t proc, const xdr::Writer& w) {
        auto bytes = d_.call(caller_, {{rpc::kQemuProgram, 1, proc, rpc::Type::call, 9, rpc::ReplyStatus::ok}, w.bytes()});
        auto m = rpc::decode_message(std::span(bytes).subspan(rpc::kLengthSize));
        if (!m) return {{}, rpc::RemoteError{0, 0, "undecodable reply", 2, {}}};
        if (m->header.status == rpc::ReplyStatus::error) return {{}, *rpc::decode_error(m->payload)};
        return {m->payload, std::nullopt};
    }
    // Registers (domain `only` or all, `event` or all, `flags`): the callback id, or the error's message.
    std::variant<int32_t, std::string> register_for(std::optional<Uuid> only, std::optional<std::string> event,
                                                    uint32_t flags = 0) {
        xdr::Writer w;
        w.boolean(only.has_value());
        if (only) {
            w.string("x");
            w.fixed_opaque(*only);
            w.i32(-1);
        }
        w.optional_string(event);
        w.u32(flags);
        auto [payload, error] = call(4, w);
        if (error) return error->message;
        xdr::Reader r(payload);
        auto id = r.i32();
        return id ? *id : -1;
    }
    int32_t registered(std::optional<Uuid> only, std::optional<std::string> event, uint32_t flags = 0) {
        auto r = register_for(only, std::move(event), flags);
        if (auto* why = std::get_if<std::string>(&r)) ADD_FAILURE() << *why;
        return std::holds_alternative<int32_t>(r) ? std::get<int32_t>(r) : -1;
    }
    std::optional<rpc::Message> next_message() { return test::next_event_message(theirs_.get()); }
    // The callbacks the next messages went to, until none is waiting.
    std::vector<int32_t> heard() {
        std::vector<int32_t> ids;
        while (auto m = next_message()) {
            xdr::Reader r(m->payload);
            auto id = r.i32();
            ids.push_back(id ? *id : -1);
        }
        return ids;
    }
    static DomainDef domain(const std::string& name, uint8_t tag) {
        DomainDef d;
        d.name = name;
        d.uuid[0] = tag;
        return d;
    }
    static Json event(const std::string& name, Json data = Json{{"status", "active"}}) {
        return Json{{"event", name}, {"data", std::move(data)}, {"timestamp", {{"seconds", 1765000000}, {"microseconds", 250}}}};
    }
};

TEST_F(MonitorEventHubTest, AnEventReachesItsCallbackAsQemusDriverSendsIt) {
    int32_t callback = registered(std::nullopt, std::nullopt);
    hub_.relay(domain("a", 1), 7, event("MIGRATION", Json{{"status", "precopy-paused"}}));
    auto m = next_message();
    ASSERT_TRUE(m);
    EXPECT_EQ(m->header.program, rpc::kQemuProgram);
    EXPECT_EQ(m->header.procedure, 6) << "QEMU_PROC_DOMAIN_MONITOR_EVENT";
    EXPECT_EQ(m->header.type, rpc::Type::message);
    xdr::Reader body(m->payload);  // qemu_domain_monitor_event_msg
    EXPECT_EQ(*body.i32(), callback);
    EXPECT_EQ(*body.string(100), "a");
    Uuid u{};
    ASSERT_TRUE(body.fixed_opaque(u));
    EXPECT_EQ(u, domain("a", 1).uuid);
    EXPECT_EQ(*body.i32(), 7);
    EXPECT_EQ(*body.string(100), "MIGRATION");
    EXPECT_EQ(*body.i64(), 1765000000) << "the vmm's timestamp";
    EXPECT_EQ(*body.u32(), 250u);
    auto details = body.optional_string(1000);
    ASSERT_TRUE(details && *details);
    EXPECT_EQ(**details, R"({"status":"precopy-paused"})");
    EXPECT_EQ(body.left(), 0u);
    EXPECT_FALSE(next_message());
}

TEST_F(MonitorEventHubTest, NamesMatchExactlyWithoutCaseOrAsAnExpression) {
    int32_t exact = registered(std::nullopt, "MIGRATION");
    int32_t nocase = registered(std::nullopt, "migration", VIR_CONNECT_DOMAIN_QEMU_MONITOR_EVENT_REGISTER_NOCASE);
    int32_t regex = registered(std::nullopt, "^(STOP|RESUME)$", VIR_CONNECT_DOMAIN_QEMU_MONITOR_EVENT_REGISTER_REGEX);
    int32_t both = registered(std::nullopt, "stalled$", VIR_CONNECT_DOMAIN_QEMU_MONITOR_EVENT_REGISTER_REGEX |
                                                            VIR_CONNECT_DOMAIN_QEMU_MONITOR_EVENT_REGISTER_NOCASE);
    hub_.relay(domain("a", 1), 1, event("MIGRATION"));
    EXPECT_EQ(heard(), (std::vector<int32_t>{exact, nocase}));
    hub_.relay(domain("a", 1), 1, event("MIGRATION_PASS"));
    EXPECT_EQ(heard(), std::vector<int32_t>{}) << "an exact name is not a prefix";
    hub_.relay(domain("a", 1), 1, event("STOP"));
    EXPECT_EQ(heard(), std::vector<int32_t>{regex});
    hub_.relay(domain("a", 1), 1, event("X_MIGRATION_STALLED"));
    EXPECT_EQ(heard(), std::vector<int32_t>{both});
}

TEST_F(MonitorEventHubTest, ACallbackForOneDomainHearsOnlyThatOne) {
    int32_t only_b = registered(domain("b", 2).uuid, std::nullopt);
    hub_.relay(domain("a", 1), 1, event("STOP"));
    EXPECT_EQ(heard(), std::vector<int32_t>{});
    hub_.relay(domain("b", 2), 2, event("STOP"));
    EXPECT_EQ(heard(), std::vector<int32_t>{only_b});
}

TEST_F(MonitorEventHubTest, WhatTheVmmWroteIsCheckedBeforeItIsSent) {
    registered(std::nullopt, std::nullopt);
    hub_.relay(domain("a", 1), 1, Json{{"data", Json::object()}});
    hub_.relay(domain("a", 1), 1, Json{{"event", 5}});
    hub_.relay(domain("a", 1), 1, Json{{"event", ""}});
    hub_.relay(domain("a", 1), 1, Json{{"event", std::string(300, 'E')}});
    hub_.relay(domain("a", 1), 1, Json::array());
    hub_.relay(domain("a", 1), 1, Json{{"event", "BIG"}, {"data", std::string(rpc::kMaxString + 1, 'x')}});
    EXPECT_FALSE(next_message()) << "no name, not a string, empty, too long, not an object, too large: dropped";
    // No data: no details; a timestamp that does not read: the time it was relayed.
    hub_.relay(domain("a", 1), 1, Json{{"event", "RESUME"}, {"timestamp", "yesterday"}});
    auto m = next_message();
    ASSERT_TRUE(m);
    xdr::Reader body(m->payload);
    ASSERT_TRUE(body.i32() && body.string(100));
    Uuid u{};
    ASSERT_TRUE(body.fixed_opaque(u) && body.i32());
    EXPECT_EQ(*body.string(100), "RESUME");
    EXPECT_GT(*body.i64(), 1700000000);
    EXPECT_LT(*body.u32(), 1000000u);
    auto details = body.optional_string(100);
    ASSERT_TRUE(details);
    EXPECT_FALSE(*details) << "an event without data has no details";
}

TEST_F(MonitorEventHubTest, DeregisteredOrDisconnectedHearsNothing) {
    int32_t callback = registered(std::nullopt, std::nullopt);
    xdr::Writer w;
    w.i32(callback);
    EXPECT_FALSE(call(5, w).second);
    auto again = call(5, w).second;
    ASSERT_TRUE(again) << "the same callback twice";
    EXPECT_NE(again->message.find("not registered"), std::string::npos) << again->message;
    hub_.relay(domain("a", 1), 1, event("STOP"));
    EXPECT_FALSE(next_message());
    registered(std::nullopt, std::nullopt);
    hub_.disconnected(5);
    hub_.relay(domain("a", 1), 1, event("STOP"));
    EXPECT_FALSE(next_message());
}

TEST_F(MonitorEventHubTest, BadRegistrationsAreRefusedInOneLine) {
    auto refused = [this](std::optional<std::string> event, uint32_t flags) {
        auto r = register_for(std::nullopt, std::move(event), flags);
        return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : std::string();
    };
    EXPECT_NE(refused("(", VIR_CONNECT_DOMAIN_QEMU_MONITOR_EVENT_REGISTER_REGEX).find("failed to compile regex '('"), std::string::npos);
    EXPECT_NE(refused("STOP", 4).find("unsupported flags (0x4)"), std::string::npos);
    EXPECT_NE(refused(std::string("ST\0P", 4), 0).find("NUL"), std::string::npos);
    EXPECT_NE(refused(std::string(MonitorEventHub::kMaxEventPattern + 1, 'x'), 0), "") << "a pattern is bounded";
    xdr::Writer truncated;
    truncated.boolean(false);
    EXPECT_TRUE(call(4, truncated).second);
    caller_.read_only = true;
    auto denied = refused("STOP", 0);
    EXPECT_NE(denied.find("read-only"), std::string::npos) << denied << ": libvirt's ACL is connect:write";
    caller_.read_only = false;
    for (size_t i = 0; i < MonitorEventHub::kMaxCallbacksPerConnection; ++i) ASSERT_EQ(refused(std::nullopt, 0), "");
    EXPECT_NE(refused(std::nullopt, 0).find("at most"), std::string::npos) << "callbacks are bounded";
}

}  // namespace
}  // namespace vmmd

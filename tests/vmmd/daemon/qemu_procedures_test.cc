#include "vmmd/daemon/qemu_procedures.h"

#include <gtest/gtest.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <unistd.h>

#include <filesystem>

#include "vmmd/domain/domain_xml.h"

namespace vmmd {
namespace {

using vmm::monitor::Json;

constexpr Uuid kUpUuid = {1};
constexpr Uuid kDownUuid = {2};

// What the stand-in vmm was asked last, and what it answers: {"status":"running"} to any QMP
// command but "fail", the line itself (prefixed) to human-monitor-command.
struct StandInVmm {
    std::string command;
    Json args;
    MonitorCall call() {
        return [this](const Uuid&, const std::string& c, const Json& a) -> vmm::Result<Json> {
            command = c;
            args = a;
            if (c == "fail") return vmm::Error("The command fail has not been found");
            if (c == "human-monitor-command") return Json("text of " + vmm::monitor::str(a, "command-line"));
            return Json{{"status", "running"}};
        };
    }
};

class QemuProgram : public ::testing::Test {
protected:
    std::string dir_ = "/tmp/vmmd-qemu-" + std::to_string(::getpid());
    std::unique_ptr<DomainStore> store_;
    StandInVmm vmm_;
    std::unique_ptr<rpc::Dispatcher> d_;

    void SetUp() override {
        auto s = DomainStore::open(dir_, [] { return Uuid{9}; }, [](const std::string&) {});
        ASSERT_TRUE(s) << s.error().message();
        store_ = std::move(*s);
        auto xml = [](const char* name) {
            return std::string("<domain type='vmm'><name>") + name + "</name><memory>4096</memory><os><kernel>idle</kernel></os></domain>";
        };
        auto running = parse_domain_xml(xml("up"), kUpUuid);
        auto defined = parse_domain_xml(xml("down"), kDownUuid);
        ASSERT_TRUE(running && defined);
        ASSERT_TRUE(store_->add_transient(*running));
        store_->set_running(kUpUuid, 3, {VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_BOOTED}, *running);
        ASSERT_TRUE(store_->define(*defined));
        d_ = std::make_unique<rpc::Dispatcher>(qemu_procedures(*store_, vmm_.call()));
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    // QEMU_PROC_DOMAIN_MONITOR_COMMAND on `name`: the result string, or the error.
    std::pair<std::string, std::optional<rpc::RemoteError>> command(rpc::Caller& c, const std::string& name,
                                                                    const std::string& cmd, uint32_t flags = 0) {
        auto v = store_->by_name(name);
        xdr::Writer w;
        w.string(name);
        w.fixed_opaque(v->def.uuid);
        w.i32(v->id);
        w.string(cmd);
        w.u32(flags);
        return send(c, rpc::kQemuProgram, 1, w.take());
    }
    std::pair<std::string, std::optional<rpc::RemoteError>> send(rpc::Caller& c, uint32_t program, int32_t proc,
                                                                 std::vector<uint8_t> payload) {
        auto bytes = d_->call(c, {{program, 1, proc, rpc::Type::call, 5, rpc::ReplyStatus::ok}, std::move(payload)});
        auto m = rpc::decode_message(std::span(bytes).subspan(rpc::kLengthSize));
        if (!m) return {"", rpc::RemoteError{0, 0, "undecodable reply", 2, {}}};
        EXPECT_EQ(m->header.program, program) << "the reply is of the call's program";
        if (m->header.status == rpc::ReplyStatus::error) return {"", *rpc::decode_error(m->payload)};
        xdr::Reader r(m->payload);
        return {*r.string(rpc::kMaxString), std::nullopt};
    }
    static rpc::Caller opened(bool read_only = false) {
        rpc::Caller c;
        c.opened = true;
        c.read_only = read_only;
        return c;
    }
};

TEST_F(QemuProgram, AQmpRequestIsAnsweredWithTheVmmsReplyAndItsId) {
    rpc::Caller c = opened();
    auto [out, error] = command(c, "up", R"({"execute":"query-status","arguments":{"a":1},"id":"libvirt-7"})");
    ASSERT_FALSE(error) << error->message;
    EXPECT_EQ(vmm_.command, "query-status");
    EXPECT_EQ(vmm_.args, (Json{{"a", 1}}));
    EXPECT_EQ(Json::parse(out), (Json{{"return", {{"status", "running"}}}, {"id", "libvirt-7"}}));
    // The vmm's refusal is the reply, as QEMU's is under libvirt: not a failed call.
    std::tie(out, error) = command(c, "up", R"({"execute":"fail"})");
    ASSERT_FALSE(error) << error->message;
    EXPECT_EQ(Json::parse(out), (Json{{"error", {{"class", "GenericError"}, {"desc", "The command fail has not been found"}}}}));
}

TEST_F(QemuProgram, AnHmpLineGoesThroughHumanMonitorCommand) {
    rpc::Caller c = opened();
    auto [out, error] = command(c, "up", "info migrate-plan", VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP);
    ASSERT_FALSE(error) << error->message;
    EXPECT_EQ(vmm_.command, "human-monitor-command");
    EXPECT_EQ(out, "text of info migrate-plan");
}

TEST_F(QemuProgram, WhatIsNotARequestIsRefusedInOneLineAndTheVmmIsNotAsked) {
    rpc::Caller c = opened();
    const std::vector<std::string> bads = {"info status", "[1,2]", "{\"execute\":", std::string(70000, '[')};
    for (const std::string& bad : bads) {
        auto [out, error] = command(c, "up", bad);
        ASSERT_TRUE(error) << bad.substr(0, 40) << " answered " << out;
        EXPECT_EQ(error->code, VIR_ERR_INVALID_ARG);
        EXPECT_NE(error->message.find("not a QMP request"), std::string::npos) << error->message;
        EXPECT_EQ(error->message.find('\n'), std::string::npos);
    }
    EXPECT_EQ(vmm_.command, "");
    // A request that parses but is not one QEMU would run: its error reply, as QEMU words it.
    auto [out, error] = command(c, "up", R"({"execute":"query-status","arguments":[1],"id":3})");
    ASSERT_FALSE(error);
    EXPECT_EQ(Json::parse(out)["error"]["desc"], "QMP input member 'arguments' must be an object");
    EXPECT_EQ(Json::parse(out)["id"], 3);
    std::tie(out, error) = command(c, "up", R"({"arguments":{}})");
    EXPECT_NE(out.find("lacks member 'execute'"), std::string::npos) << out;
    EXPECT_EQ(vmm_.command, "");
}

TEST_F(QemuProgram, RefusesReadOnlyClientsStoppedDomainsUnknownFlagsAndOtherProcedures) {
    rpc::Caller ro = opened(true);
    auto [_, error] = command(ro, "up", R"({"execute":"query-status"})");
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, VIR_ERR_OPERATION_DENIED);
    rpc::Caller c = opened();
    std::tie(_, error) = command(c, "down", R"({"execute":"query-status"})");
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, VIR_ERR_OPERATION_INVALID);
    EXPECT_NE(error->message.find("'down' is not running"), std::string::npos) << error->message;
    std::tie(_, error) = command(c, "up", "info status", 2);
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, VIR_ERR_INVALID_ARG);
    std::tie(_, error) = send(c, rpc::kQemuProgram, 4, {});  // CONNECT_DOMAIN_MONITOR_EVENT_REGISTER
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, VIR_ERR_NO_SUPPORT);
    EXPECT_NE(error->message.find("procedure 4 of program 0x20008087"), std::string::npos) << error->message;
    EXPECT_EQ(vmm_.command, "");
    EXPECT_TRUE(d_->serves(rpc::kQemuProgram));
    EXPECT_FALSE(d_->serves(0x20008088));
}

}  // namespace
}  // namespace vmmd

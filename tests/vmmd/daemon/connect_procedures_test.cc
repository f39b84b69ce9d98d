#include "vmmd/daemon/connect_procedures.h"

#include <gtest/gtest.h>
#include <libvirt/virterror.h>

namespace vmmd {
namespace {

rpc::Message call(int32_t proc, std::vector<uint8_t> payload = {}) {
    return rpc::Message{rpc::Header{rpc::kRemoteProgram, rpc::kRemoteVersion, proc, rpc::Type::call, 1, rpc::ReplyStatus::ok},
                        std::move(payload)};
}

std::vector<uint8_t> open_args(const std::optional<std::string>& name, uint32_t flags) {
    xdr::Writer w;
    w.optional_string(name);
    w.u32(flags);
    return w.take();
}

// The reply's payload (empty on error) and error.
std::pair<std::vector<uint8_t>, std::optional<rpc::RemoteError>> reply(const rpc::Dispatcher& d, rpc::Caller& c,
                                                                       const rpc::Message& m) {
    auto bytes = d.call(c, m);
    auto decoded = rpc::decode_message(std::span(bytes).subspan(rpc::kLengthSize));
    if (!decoded) return {{}, rpc::RemoteError{0, 0, "undecodable reply", 2, {}}};
    if (decoded->header.status == rpc::ReplyStatus::ok) return {decoded->payload, std::nullopt};
    auto e = rpc::decode_error(decoded->payload);
    return {{}, e ? std::optional(*e) : std::nullopt};
}

TEST(VmmdConnect, OpensTheVmmUrisAndNoOther) {
    rpc::Dispatcher d(connect_procedures({"vmm:///system", 1002003, "/usr/bin/vmm"}));
    rpc::Caller refused;
    auto [_, error] = reply(d, refused, call(1, open_args("qemu:///system", 0)));
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, VIR_ERR_NO_CONNECT);
    EXPECT_FALSE(refused.opened);
    rpc::Caller c;
    EXPECT_FALSE(reply(d, c, call(1, open_args(std::nullopt, 1))).second);
    EXPECT_TRUE(c.opened);
    EXPECT_TRUE(c.read_only) << "VIR_CONNECT_RO";
    EXPECT_EQ(c.uri, "vmm:///system");
    auto [version, verror] = reply(d, c, call(4));
    ASSERT_FALSE(verror);
    xdr::Reader r(version);
    EXPECT_EQ(*r.u64(), 1002003u);
}

TEST(VmmdConnect, NodeInfoHasLibvirtsLayoutAndAddsUp) {
    rpc::Dispatcher d(connect_procedures({"vmm:///system", 1, "/usr/bin/vmm"}));
    rpc::Caller c;
    ASSERT_FALSE(reply(d, c, call(1, open_args("vmm:///system", 0))).second);
    auto [info, error] = reply(d, c, call(6));
    ASSERT_FALSE(error) << error->message;
    ASSERT_EQ(info.size(), 32 * 4 + 8 + 6 * 4u) << "char model[32] is 32 XDR units";
    xdr::Reader r(info);
    std::string model;
    for (int i = 0; i < 32; ++i) {
        int32_t ch = *r.i32();
        if (ch != 0) model += static_cast<char>(ch);
    }
    EXPECT_EQ(model, "x86_64");
    EXPECT_GT(*r.u64(), 0u);
    int32_t cpus = *r.i32();
    (void)*r.i32();  // MHz: not every machine says
    int32_t nodes = *r.i32(), sockets = *r.i32(), cores = *r.i32(), threads = *r.i32();
    EXPECT_EQ(nodes * sockets * cores * threads, cpus);
}

TEST(VmmdConnect, AnnouncesOnlyTheFeaturesItServes) {
    rpc::Dispatcher d(connect_procedures({"vmm:///system", 1, "/usr/bin/vmm"}));
    rpc::Caller c;
    auto feature = [&](int32_t f) {
        xdr::Writer w;
        w.i32(f);
        auto [out, error] = reply(d, c, call(60, w.take()));
        EXPECT_FALSE(error);
        xdr::Reader r(out);
        auto v = r.i32();
        return v ? *v : -1;
    };
    EXPECT_EQ(feature(10), 1) << "keepalive";
    EXPECT_EQ(feature(6), 1) << "migration v3";
    EXPECT_EQ(feature(13), 1) << "migration with typed parameters";
    EXPECT_EQ(feature(14), 1) << "event callbacks";
    EXPECT_EQ(feature(4), 1) << "peer-to-peer migration";
    EXPECT_EQ(feature(7), 1) << "change protection (the definition holds still while a migration runs)";
    EXPECT_EQ(feature(1), 0) << "migration v1: not served";
    EXPECT_EQ(feature(8), 0) << "fd passing: not served";
}

TEST(VmmdConnect, OnlyAUnixSocketIsSecure) {
    rpc::Dispatcher d(connect_procedures({"vmm:///system", 1, "/usr/bin/vmm"}));
    for (bool secure : {true, false}) {
        rpc::Caller c;
        c.secure = secure;
        ASSERT_FALSE(reply(d, c, call(1, open_args("vmm:///system", 0))).second);
        auto [out, error] = reply(d, c, call(149));
        ASSERT_FALSE(error);
        xdr::Reader r(out);
        EXPECT_EQ(*r.i32(), secure ? 1 : 0);
    }
}

TEST(VmmdConnect, CapabilitiesNameTheHostTheGuestTypeAndTheEmulator) {
    NodeInfo n;
    n.memory_kib = 1024;
    n.cpus = 4;
    n.sockets = 1;
    n.cores = 2;
    n.threads = 2;
    std::string xml = capabilities_xml(n, "/opt/a&b/vmm");
    EXPECT_NE(xml.find("<topology sockets='1' dies='1' cores='2' threads='2'/>"), std::string::npos) << xml;
    EXPECT_NE(xml.find("<memory unit='KiB'>1024</memory>"), std::string::npos) << xml;
    EXPECT_NE(xml.find("<cpu id='3' socket_id='0' core_id='1' siblings='3'/>"), std::string::npos) << xml;
    EXPECT_NE(xml.find("<emulator>/opt/a&amp;b/vmm</emulator>"), std::string::npos) << xml;
    EXPECT_NE(xml.find("<domain type='vmm'/>"), std::string::npos) << xml;
    EXPECT_NE(xml.find("<uri_transport>rdma</uri_transport>"), std::string::npos) << xml;
}

TEST(VmmdConnect, VersionNumbersAsLibvirtCountsThem) {
    EXPECT_EQ(libvirt_version_number("9.0.0"), 9000000u);
    EXPECT_EQ(libvirt_version_number("0.1.2"), 1002u);
    EXPECT_EQ(libvirt_version_number("x"), 0u);
}

}  // namespace
}  // namespace vmmd

#include "vmmd/rpc/dispatch.h"

#include <gtest/gtest.h>
#include <libvirt/virterror.h>

namespace vmmd::rpc {
namespace {

Message call(int32_t proc, std::vector<uint8_t> payload = {}, uint32_t version = kRemoteVersion) {
    return Message{Header{kRemoteProgram, version, proc, Type::call, 42, ReplyStatus::ok}, std::move(payload)};
}

// The reply to `m`, decoded: its header and, on error, the error.
struct Answer {
    Header header;
    std::vector<uint8_t> payload;
    std::optional<RemoteError> error;
};
Answer answer(const Dispatcher& d, Caller& c, const Message& m) {
    auto bytes = d.call(c, m);
    auto decoded = decode_message(std::span(bytes).subspan(kLengthSize));
    EXPECT_TRUE(decoded);
    Answer a{decoded->header, decoded->payload, std::nullopt};
    if (a.header.status == ReplyStatus::error) {
        auto e = decode_error(a.payload);
        EXPECT_TRUE(e) << e.error().message();
        if (e) a.error = *e;
    }
    return a;
}

Dispatcher table() {
    return Dispatcher({
        {1, "OPEN", Access::unopened, [](Caller& c, xdr::Reader&) { c.opened = true; return ok(); }},
        {3, "QUERY", Access::read_only, [](Caller&, xdr::Reader& a) {
             auto v = a.u32();
             if (!v) return fail(VIR_ERR_RPC, "QUERY: no argument");
             xdr::Writer w;
             w.u32(*v + 1);
             return ok(std::move(w));
         }},
        {12, "CHANGE", Access::write, [](Caller&, xdr::Reader&) { return ok(); }},
    });
}

std::vector<uint8_t> u32(uint32_t v) {
    xdr::Writer w;
    w.u32(v);
    return w.take();
}

TEST(RpcDispatch, AnswersWithTheCallsSerialAndReturnValue) {
    Dispatcher d = table();
    Caller c;
    answer(d, c, call(1));
    Answer a = answer(d, c, call(3, u32(41)));
    EXPECT_EQ(a.header.type, Type::reply);
    EXPECT_EQ(a.header.serial, 42u);
    ASSERT_FALSE(a.error) << a.error->message;
    EXPECT_EQ(a.payload, u32(42));
}

TEST(RpcDispatch, NothingButOpeningBeforeTheConnectionIsOpen) {
    Dispatcher d = table();
    Caller c;
    Answer a = answer(d, c, call(3, u32(1)));
    ASSERT_TRUE(a.error);
    EXPECT_EQ(a.error->code, VIR_ERR_OPERATION_INVALID);
    EXPECT_NE(a.error->message.find("not open"), std::string::npos) << a.error->message;
}

TEST(RpcDispatch, AReadOnlyConnectionMayQueryButNotChange) {
    Dispatcher d = table();
    Caller c;
    c.read_only = true;
    answer(d, c, call(1));
    EXPECT_FALSE(answer(d, c, call(3, u32(1))).error);
    Answer a = answer(d, c, call(12));
    ASSERT_TRUE(a.error);
    EXPECT_EQ(a.error->code, VIR_ERR_OPERATION_DENIED);
    EXPECT_NE(a.error->message.find("CHANGE: this is a read-only connection"), std::string::npos) << a.error->message;
}

TEST(RpcDispatch, AnUnservedProcedureIsRefusedByItsLibvirtName) {
    Dispatcher d = table();
    Caller c;
    answer(d, c, call(1));
    Answer a = answer(d, c, call(53));
    ASSERT_TRUE(a.error);
    EXPECT_EQ(a.error->code, VIR_ERR_NO_SUPPORT);
    EXPECT_EQ(a.error->domain, VIR_FROM_RPC);
    EXPECT_NE(a.error->message.find("DOMAIN_CORE_DUMP"), std::string::npos) << a.error->message;
    Answer unknown = answer(d, c, call(100000));
    ASSERT_TRUE(unknown.error);
    EXPECT_NE(unknown.error->message.find("procedure 100000"), std::string::npos) << unknown.error->message;
}

TEST(RpcDispatch, EveryErrorHasLibvirtsErrorDomain) {
    EXPECT_EQ(fail(VIR_ERR_NO_DOMAIN, "x").error->domain, VIR_FROM_DOM);
    EXPECT_EQ(fail(VIR_ERR_OPERATION_INVALID, "x").error->domain, VIR_FROM_DOM);
    EXPECT_EQ(fail(VIR_ERR_XML_ERROR, "x").error->domain, VIR_FROM_DOMAIN);
    EXPECT_EQ(fail(VIR_ERR_RPC, "x").error->domain, VIR_FROM_RPC);
}

TEST(RpcDispatch, ArgumentsThatDoNotFitTheProcedureAreAnRpcError) {
    Dispatcher d = table();
    Caller c;
    answer(d, c, call(1));
    Answer missing = answer(d, c, call(3));
    ASSERT_TRUE(missing.error);
    EXPECT_EQ(missing.error->code, VIR_ERR_RPC);
    std::vector<uint8_t> extra = u32(1);
    extra.resize(8);
    Answer trailing = answer(d, c, call(3, extra));
    ASSERT_TRUE(trailing.error);
    EXPECT_NE(trailing.error->message.find("left over"), std::string::npos) << trailing.error->message;
    Answer version = answer(d, c, call(3, u32(1), 2));
    ASSERT_TRUE(version.error);
    EXPECT_EQ(version.error->code, VIR_ERR_RPC);
}

}  // namespace
}  // namespace vmmd::rpc

// The older migration steps rewritten as their _PARAMS twins (vmmd/migration/legacy_steps.h).
#include "vmmd/migration/legacy_steps.h"

#include <gtest/gtest.h>
#include <libvirt/libvirt.h>

#include "vmmd/rpc/message.h"
#include "vmmd/rpc/typed_params.h"

namespace vmmd {
namespace {

void put_domain(xdr::Writer& w) {
    w.string("demo");
    std::array<uint8_t, 16> uuid{1, 2, 3};
    w.fixed_opaque(uuid);
    w.i32(7);
}

TEST(LegacySteps, Perform3BecomesPerform3ParamsWithTheUriNameAndBandwidthAsParameters) {
    xdr::Writer w;
    put_domain(w);
    w.optional_string(std::nullopt);                      // xmlin
    w.opaque(std::vector<uint8_t>{'c'});                  // cookie
    w.optional_string(std::nullopt);                      // dconnuri
    w.optional_string(std::string("tcp://10.0.0.2:49152"));
    w.u64(VIR_MIGRATE_LIVE);
    w.optional_string(std::string("renamed"));
    w.u64(500);
    auto in = w.take();
    xdr::Reader r(in);
    auto out = perform3_as_params(r);
    ASSERT_TRUE(out) << out.error().message();
    xdr::Reader twin(*out);
    EXPECT_EQ(*twin.string(rpc::kMaxString), "demo");
    std::array<uint8_t, 16> uuid{};
    ASSERT_TRUE(twin.fixed_opaque(uuid));
    EXPECT_EQ(uuid[2], 3);
    EXPECT_EQ(*twin.i32(), 7);
    EXPECT_FALSE(*twin.optional_string(rpc::kMaxString));  // dconnuri
    auto params = rpc::decode_typed_params(twin);
    ASSERT_TRUE(params);
    EXPECT_EQ(*rpc::string_param(*params, VIR_MIGRATE_PARAM_URI), "tcp://10.0.0.2:49152");
    EXPECT_EQ(*rpc::string_param(*params, VIR_MIGRATE_PARAM_DEST_NAME), "renamed");
    EXPECT_EQ(*rpc::uint_param(*params, VIR_MIGRATE_PARAM_BANDWIDTH), 500u);
    EXPECT_EQ(*twin.opaque(16), std::vector<uint8_t>{'c'});
    EXPECT_EQ(*twin.u32(), uint32_t{VIR_MIGRATE_LIVE});
    EXPECT_TRUE(twin.finish());
}

TEST(LegacySteps, Finish3CarriesTheNameAndCancelled) {
    xdr::Writer w;
    w.string("demo");
    w.opaque({});
    w.optional_string(std::nullopt);
    w.optional_string(std::nullopt);
    w.u64(0);
    w.i32(1);
    auto in = w.take();
    xdr::Reader r(in);
    auto out = finish3_as_params(r);
    ASSERT_TRUE(out);
    xdr::Reader twin(*out);
    auto params = rpc::decode_typed_params(twin);
    ASSERT_TRUE(params);
    EXPECT_EQ(*rpc::string_param(*params, VIR_MIGRATE_PARAM_DEST_NAME), "demo");
    EXPECT_TRUE(twin.opaque(16));
    EXPECT_EQ(*twin.u32(), 0u);
    EXPECT_EQ(*twin.i32(), 1);
}

TEST(LegacySteps, RefusesFlagsAboveAWordAndArgumentsCutShort) {
    xdr::Writer w;
    put_domain(w);
    w.opaque({});
    w.u64(uint64_t{1} << 40);
    w.i32(0);
    auto in = w.take();
    xdr::Reader r(in);
    auto out = confirm3_as_params(r);
    ASSERT_FALSE(out);
    EXPECT_NE(out.error().message().find("bit 31"), std::string::npos);
    std::vector<uint8_t> cut(in.begin(), in.begin() + 10);
    xdr::Reader short_reader(cut);
    EXPECT_FALSE(confirm3_as_params(short_reader));
}

}  // namespace
}  // namespace vmmd

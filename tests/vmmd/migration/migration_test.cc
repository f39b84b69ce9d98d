#include <gtest/gtest.h>
#include <libvirt/libvirt.h>

#include "vmmd/migration/cookie.h"
#include "vmmd/migration/deadline_settings.h"
#include "vmmd/migration/job_stats.h"
#include "vmmd/migration/migration_uri.h"
#include "vmmd/migration/pin_limit.h"
#include "vmmd/rpc/typed_params.h"

namespace vmmd {
namespace {

TEST(MigrationUri, LibvirtsFormsBecomeVmms) {
    struct Case {
        const char* in;
        const char* vmm;
    } cases[] = {{"tcp://10.0.0.2:49152", "tcp:10.0.0.2:49152"}, {"tcp:10.0.0.2:49152", "tcp:10.0.0.2:49152"},
                 {"rdma://192.168.1.7:4444", "rdma:192.168.1.7:4444"}, {"tcp://[fe80::1]:5000", "tcp:[fe80::1]:5000"},
                 {"tcp://host.example/", "tcp:host.example:0"}};
    for (const Case& c : cases) {
        auto u = parse_migration_uri(c.in);
        ASSERT_TRUE(u) << c.in << ": " << u.error().message();
        EXPECT_EQ(vmm_uri(*u), c.vmm) << c.in;
    }
    EXPECT_EQ(libvirt_uri(*parse_migration_uri("rdma:h:1")), "rdma://h:1");
}

TEST(MigrationUri, WhatIsNotOneIsRefusedSayingWhy) {
    for (const char* bad : {"", "unix:///tmp/x", "tcp://", "tcp://h:0", "tcp://h:70000", "tcp://h:12x", "tcp://[::1:5",
                            "tcp://h/path", "tcp://a b:1", "host:5"}) {
        EXPECT_FALSE(parse_migration_uri(bad)) << bad;
    }
    auto u = parse_migration_uri("unix:/x");
    ASSERT_FALSE(u);
    EXPECT_NE(u.error().message().find("not unix://"), std::string::npos) << u.error().message();
}

// A second way as the URI's query (libvirt's clients parse the URI, so a list would not pass):
// vmm's x-fallback-uri at both ends, told back to the client whole.
TEST(MigrationUri, AFallbackInTheQueryIsVmmsFallbackUri) {
    auto u = parse_migration_uri("rdma://10.0.0.2:4444?fallback=tcp://10.0.1.2:49153");
    ASSERT_TRUE(u) << u.error().message();
    EXPECT_EQ(vmm_uri(*u), "rdma:10.0.0.2:4444");
    EXPECT_EQ(vmm_fallback_uri(*u), "tcp:10.0.1.2:49153");
    EXPECT_EQ(libvirt_uri(*u), "rdma://10.0.0.2:4444?fallback=tcp://10.0.1.2:49153");
    auto escaped = parse_migration_uri("rdma://h:1?fallback=tcp%3A%2F%2F%5Bfe80%3A%3A1%5D%3A2");
    ASSERT_TRUE(escaped) << escaped.error().message();
    EXPECT_EQ(vmm_fallback_uri(*escaped), "tcp:[fe80::1]:2");
    auto none = parse_migration_uri("tcp://h:1");
    ASSERT_TRUE(none);
    EXPECT_EQ(vmm_fallback_uri(*none), "");
    for (const char* bad : {"rdma://h:1?fallback=tcp://h", "rdma://h:1?fallback=tcp://h:2&x=1", "rdma://h:1?fallback=unix:/x",
                            "rdma://h:1?", "rdma://h:1?other=tcp://h:2", "tcp://h:1?fallback=tcp://h:1",
                            "rdma://h:1?fallback=tcp://h:2?fallback=tcp://h:3", "rdma://h:1?fallback=%zz"}) {
        auto r = parse_migration_uri(bad);
        EXPECT_FALSE(r) << bad;
    }
    auto portless = parse_migration_uri("rdma://h:1?fallback=tcp://h");
    ASSERT_FALSE(portless);
    EXPECT_NE(portless.error().message().find("the fallback needs its port"), std::string::npos) << portless.error().message();
}

TEST(TypedParams, RoundTripEveryType) {
    std::vector<rpc::TypedParam> ps = {{"i", int32_t{-3}}, {"u", uint32_t{7}}, {"l", int64_t{-9}}, {"ul", uint64_t{1} << 40},
                                       {"d", 2.5}, {"b", true}, {"s", std::string("tcp://h:1")}};
    xdr::Writer w;
    rpc::encode_typed_params(w, ps);
    xdr::Reader r(w.bytes());
    auto back = rpc::decode_typed_params(r);
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(*back, ps);
    EXPECT_EQ(*rpc::uint_param(ps, "u"), 7u);
    EXPECT_EQ(*rpc::uint_param(ps, "ul"), uint64_t{1} << 40);
    EXPECT_FALSE(rpc::uint_param(ps, "i")) << "a negative number is no bandwidth";
    EXPECT_FALSE(rpc::uint_param(ps, "s")) << "a string is no number";
    EXPECT_FALSE(*rpc::uint_param(ps, "absent"));
    EXPECT_EQ(**rpc::string_param(ps, "s"), "tcp://h:1");
}

TEST(TypedParams, BadListsAreRefused) {
    xdr::Writer too_many;
    too_many.u32(65);
    xdr::Reader r1(too_many.bytes());
    EXPECT_FALSE(rpc::decode_typed_params(r1));
    xdr::Writer bad_type;
    bad_type.u32(1);
    bad_type.string("x");
    bad_type.i32(8);
    bad_type.i32(0);
    xdr::Reader r2(bad_type.bytes());
    auto e = rpc::decode_typed_params(r2);
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().message().find("type 8"), std::string::npos);
}

TEST(JobStats, FromQueryMigrateUnderLibvirtsNames) {
    auto q = *vmm::monitor::parse_request(
        R"({"status":"completed","total-time":120,"setup-time":3,"downtime":9,"cpu-throttle-percentage":20,)"
        R"("ram":{"total":67108864,"transferred":8781824,"remaining":0,"duplicate":500,"normal":2144,)"
        R"("normal-bytes":8781824,"mbps":800,"dirty-pages-rate":12,"dirty-sync-count":2}})");
    JobStats j = job_from_query_migrate(q, VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT);
    EXPECT_EQ(j.type, VIR_DOMAIN_JOB_COMPLETED);
    EXPECT_TRUE(j.has_downtime);
    EXPECT_EQ(j.memory_bps, 100000000u) << "800 megabits/s";
    auto ps = job_params(j);
    auto has = [&](const char* name, rpc::TypedValue v) {
        for (const auto& p : ps)
            if (p.name == name) return p.value == v;
        return false;
    };
    EXPECT_TRUE(has(VIR_DOMAIN_JOB_TIME_ELAPSED, uint64_t{120}));
    EXPECT_TRUE(has(VIR_DOMAIN_JOB_DOWNTIME, uint64_t{9}));
    EXPECT_TRUE(has(VIR_DOMAIN_JOB_MEMORY_TOTAL, uint64_t{67108864}));
    EXPECT_TRUE(has(VIR_DOMAIN_JOB_MEMORY_CONSTANT, uint64_t{500}));
    EXPECT_TRUE(has(VIR_DOMAIN_JOB_MEMORY_ITERATION, uint64_t{2}));
    EXPECT_TRUE(has(VIR_DOMAIN_JOB_AUTO_CONVERGE_THROTTLE, int32_t{20}));
    EXPECT_TRUE(has(VIR_DOMAIN_JOB_SUCCESS, true));
    EXPECT_FALSE(has(VIR_DOMAIN_JOB_MEMORY_POSTCOPY_REQS, uint64_t{0})) << "no postcopy: not given, as libvirt's";
}

// query-migrate gives the dirty rate as a fraction of pages per second (as QEMU does).
TEST(JobStats, TheDirtyRateIsTheVmmsFractionRounded) {
    auto q = *vmm::monitor::parse_request(R"({"status":"active","ram":{"dirty-pages-rate":32.63,"dirty-sync-count":3}})");
    EXPECT_EQ(job_from_query_migrate(q, VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT).memory_dirty_rate, 33u);
    auto odd = *vmm::monitor::parse_request(R"({"status":"active","ram":{"dirty-pages-rate":-5e300}})");
    EXPECT_EQ(job_from_query_migrate(odd, VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT).memory_dirty_rate, 0u);
}

// A postcopy's requests (QEMU's ram.postcopy-requests): what 'virsh domjobinfo' shows as
// "Postcopy requests", and carried in the cookie to the destination.
TEST(JobStats, PostcopyRequestsUnderLibvirtsName) {
    auto q = *vmm::monitor::parse_request(
        R"({"status":"postcopy-active","total-time":50,"ram":{"total":4096,"postcopy-requests":37}})");
    JobStats j = job_from_query_migrate(q, VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT);
    EXPECT_EQ(j.memory_postcopy_requests, 37u);
    bool given = false;
    for (const auto& p : job_params(j)) given |= p.name == VIR_DOMAIN_JOB_MEMORY_POSTCOPY_REQS && p.value == rpc::TypedValue{uint64_t{37}};
    EXPECT_TRUE(given);
    auto back = job_from_json(job_to_json(j));
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(*back, j);
}

TEST(Cookie, RoundTripsWithStats) {
    MigrationCookie c{"hostA", "demo", {1, 2, 3}, std::nullopt};
    auto back = decode_cookie(encode_cookie(c));
    ASSERT_TRUE(back && *back) << (back ? "" : back.error().message());
    EXPECT_EQ(**back, c);
    JobStats s;
    s.type = VIR_DOMAIN_JOB_COMPLETED;
    s.memory_total = 42;
    c.stats = s;
    back = decode_cookie(encode_cookie(c));
    ASSERT_TRUE(back && *back);
    EXPECT_EQ(**back, c);
    EXPECT_FALSE(*decode_cookie({})) << "no cookie at all";
}

TEST(Cookie, APeersOtherCookieIsRefused) {
    auto bytes = [](std::string_view s) { return std::vector<uint8_t>(s.begin(), s.end()); };
    for (const char* bad : {"<qemu-migration/>", "{}", R"({"vmm-migration":2,"hostname":"h","name":"n","uuid":"00000000-0000-0000-0000-000000000000"})",
                            R"({"vmm-migration":1,"hostname":"h","name":"n","uuid":"nope"})",
                            R"({"vmm-migration":1,"hostname":"h","name":"n","uuid":"00000000-0000-0000-0000-000000000000","stats":{}})"}) {
        EXPECT_FALSE(decode_cookie(bytes(bad))) << bad;
    }
}

}  // namespace
}  // namespace vmmd

namespace vmmd {
namespace {

TEST(PinLimit, DynamicRegistrationIsBoundedOnlyWhereTheHardLimitIsBelowTheRam) {
    constexpr uint64_t MiB = 1ull << 20;
    auto roomy = dynamic_pin_limit(64 * MiB, 512 * MiB);
    ASSERT_TRUE(roomy);
    EXPECT_FALSE(*roomy) << "everything fits: no limit";
    auto tight = dynamic_pin_limit(64 * MiB, 40 * MiB);
    ASSERT_TRUE(tight);
    EXPECT_EQ(*tight, 40 * MiB - kRdmaPinHeadroom);
    auto edge = dynamic_pin_limit(64 * MiB, 64 * MiB);
    ASSERT_TRUE(edge && *edge) << "the RAM alone, without the transport's own buffers, does not fit";
    auto none = dynamic_pin_limit(64 * MiB, 4 * MiB);
    ASSERT_FALSE(none);
    EXPECT_NE(none.error().message().find("raise it"), std::string::npos) << none.error().message();
}

}  // namespace
// When a migration must end: its parameters over the domain's XML over vmmd's options, all
// three always set (a vmm keeps its settings from one migration to the next).
TEST(DeadlineSettings, TheMigrationsOverTheDomainsOverVmmds) {
    DomainDef def;
    DeadlineSettings vmmd;
    auto p = deadline_parameters(def, {}, vmmd);
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(*p, (vmm::monitor::Json{{"x-deadline", "off"}, {"x-deadline-strategy", "cancel"}, {"x-stall-timeout", 0}}));
    vmmd = {"10m", "throttle", 60000};
    def.migration.deadline = "5m";
    def.migration.stall_timeout_ms = 30000;
    p = deadline_parameters(def, {}, vmmd);
    ASSERT_TRUE(p);
    EXPECT_EQ(*p, (vmm::monitor::Json{{"x-deadline", "5m"}, {"x-deadline-strategy", "throttle"}, {"x-stall-timeout", 30000}}));
    std::vector<rpc::TypedParam> params = {{kParamDeadline, std::string("90s")},
                                           {kParamDeadlineStrategy, std::string("postcopy")},
                                           {kParamStallTimeout, uint64_t{0}}};
    p = deadline_parameters(def, params, vmmd);
    ASSERT_TRUE(p);
    EXPECT_EQ(*p, (vmm::monitor::Json{{"x-deadline", "90s"}, {"x-deadline-strategy", "postcopy"}, {"x-stall-timeout", 0}}));
    auto bad = deadline_parameters(def, {{kParamDeadlineStrategy, std::string("warp")}}, vmmd);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().message(), "vmm.deadline_strategy: deadline strategy 'warp': choose cancel, postcopy, downtime, "
                                     "throttle, dirty-limit or cheapest, or several in the order to try them (e.g. "
                                     "downtime,throttle)");
    p = deadline_parameters(def, {{kParamDeadlineStrategy, std::string("downtime,throttle")}}, vmmd);
    ASSERT_TRUE(p);
    EXPECT_EQ((*p)["x-deadline-strategy"], "downtime,throttle");
    bad = deadline_parameters(def, {{kParamDeadlineStrategy, std::string("cancel,throttle")}}, vmmd);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().message(), "vmm.deadline_strategy: deadline strategy 'cancel,throttle': cancel gives up the "
                                     "migration, so it can only come last");
    p = deadline_parameters(def, {{kParamDeadlineStrategy, std::string("cheapest,postcopy")}}, vmmd);
    ASSERT_TRUE(p);
    EXPECT_EQ((*p)["x-deadline-strategy"], "cheapest,postcopy");
    bad = deadline_parameters(def, {{kParamDeadlineStrategy, std::string("cheapest,throttle")}}, vmmd);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().message(), "vmm.deadline_strategy: deadline strategy 'cheapest,throttle': throttle is named "
                                     "twice (cheapest is downtime and throttle, the cheaper first)");
}

}  // namespace vmmd

#include "vmmd/runtime/run_record.h"

#include <gtest/gtest.h>

namespace vmmd {
namespace {

TEST(RunRecord, RoundTripsWithEveryMigrationPhase) {
    for (MigrationPhase p : {MigrationPhase::none, MigrationPhase::incoming, MigrationPhase::outgoing, MigrationPhase::outgoing_done}) {
        RunRecord r{{4242, 987654321}, 3, {3, 1}, "<domain type='vmm'><name>a</name></domain>", p};
        auto back = decode_run_record(encode_run_record(r));
        ASSERT_TRUE(back) << back.error().message();
        EXPECT_EQ(*back, r);
    }
}

TEST(RunRecord, ARecordFromBeforePhasesHasNone) {
    auto r = decode_run_record(R"({"pid":5,"start-ticks":1,"id":1,"state":1,"reason":1,"xml":""})");
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->phase, MigrationPhase::none);
}

TEST(RunRecord, ADamagedRecordIsAnErrorNamingTheMember) {
    struct Case {
        const char* text;
        const char* says;
    } cases[] = {
        {"", "JSON"},
        {"[1,2]", "pid"},
        {R"({"pid":"12","start-ticks":1,"id":1,"state":1,"reason":1,"xml":""})", "pid"},
        {R"({"pid":0,"start-ticks":1,"id":1,"state":1,"reason":1,"xml":""})", "pid"},
        {R"({"pid":99999999999,"start-ticks":1,"id":1,"state":1,"reason":1,"xml":""})", "pid"},
        {R"({"pid":5,"id":1,"state":1,"reason":1,"xml":""})", "start-ticks"},
        {R"({"pid":5,"start-ticks":1,"id":-1,"state":1,"reason":1,"xml":""})", "id"},
        {R"({"pid":5,"start-ticks":1,"id":1,"state":1,"reason":1,"xml":7})", "xml"},
        {R"({"pid":5,"start-ticks":1,"id":1,"state":99,"reason":1,"xml":""})", "state"},
        {R"({"pid":5,"start-ticks":1,"id":1,"state":1,"reason":1,"xml":"","migration":"sideways"})", "migration"},
        {R"({"pid":5,"start-ticks":1,"id":1,"state":1,"reason":1,"xml":"","migration":3})", "migration"},
    };
    for (const Case& c : cases) {
        auto r = decode_run_record(c.text);
        ASSERT_FALSE(r) << c.text;
        EXPECT_NE(r.error().message().find(c.says), std::string::npos) << c.text << ": " << r.error().message();
    }
}

}  // namespace
}  // namespace vmmd

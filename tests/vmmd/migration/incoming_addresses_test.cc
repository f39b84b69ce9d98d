#include "vmmd/migration/incoming_addresses.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <set>

#include "vmm/common/fd.h"

namespace vmmd {
namespace {

Uuid uuid(uint8_t n) {
    Uuid u{};
    u[15] = n;
    return u;
}

// Prepares at once never get one port: each is reserved until released, and one something else
// holds is passed over.
TEST(IncomingAddresses, ConcurrentPreparesGetDistinctReservedPorts) {
    IncomingAddresses a("localhost");
    a.use_migration_address("127.0.0.1");
    std::set<uint16_t> seen;
    for (uint8_t i = 1; i <= 8; ++i) {
        auto in = a.choose(uuid(i), std::nullopt);
        ASSERT_TRUE(in) << in.error().message();
        EXPECT_EQ(in->listen.host, "127.0.0.1");
        EXPECT_EQ(in->told.host, "127.0.0.1");
        EXPECT_EQ(in->listen.port, in->told.port);
        EXPECT_GE(in->listen.port, IncomingAddresses::kFirstPort);
        EXPECT_LE(in->listen.port, IncomingAddresses::kLastPort);
        EXPECT_TRUE(seen.insert(in->listen.port).second) << "port " << in->listen.port << " given twice";
    }
    uint16_t first = *seen.begin();
    a.release(uuid(1));
    auto again = a.choose(uuid(9), std::nullopt);
    ASSERT_TRUE(again) << again.error().message();
    EXPECT_EQ(again->listen.port, first) << "a released port is given again";
}

TEST(IncomingAddresses, APortSomethingElseHoldsIsPassedOver) {
    IncomingAddresses a("localhost");
    a.use_migration_address("127.0.0.1");
    auto probe = a.choose(uuid(1), std::nullopt);
    ASSERT_TRUE(probe) << probe.error().message();
    a.release(uuid(1));
    vmm::UniqueFd held(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(probe->listen.port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(held.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    auto next = a.choose(uuid(2), std::nullopt);
    ASSERT_TRUE(next) << next.error().message();
    EXPECT_NE(next->listen.port, probe->listen.port);
}

TEST(IncomingAddresses, AGivenUriIsKeptAndEveryAddressOnlyWhenAsked) {
    IncomingAddresses a("dst.example");
    auto given = a.choose(uuid(1), std::string("tcp://10.1.2.3:5000"));
    ASSERT_TRUE(given) << given.error().message();
    EXPECT_EQ(given->listen.host, "10.1.2.3");
    EXPECT_EQ(given->listen.port, 5000);
    EXPECT_EQ(given->told.host, "10.1.2.3");
    auto any = a.choose(uuid(2), std::string("tcp://0.0.0.0:5001"));
    ASSERT_TRUE(any) << any.error().message();
    EXPECT_EQ(any->listen.host, "0.0.0.0");
    EXPECT_EQ(any->told.host, "dst.example") << "the source cannot connect to 0.0.0.0";
}

TEST(IncomingAddresses, WithoutAHostItListensOnTheHostNamesAddressNeverOnEveryAddress) {
    IncomingAddresses a("localhost");
    auto in = a.choose(uuid(1), std::nullopt);
    ASSERT_TRUE(in) << in.error().message();
    EXPECT_TRUE(in->listen.host == "127.0.0.1" || in->listen.host == "::1") << in->listen.host;
    EXPECT_EQ(in->told.host, "localhost");
    IncomingAddresses nowhere("no-such-host.invalid");
    auto refused = nowhere.choose(uuid(2), std::nullopt);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message().find("--migration-address"), std::string::npos) << refused.error().message();
}

}  // namespace
}  // namespace vmmd

// The daemon's one table of procedures (vmmd/rpc/procedures.h) against libvirt's list
// (procedure_names.cc, typed from remote_protocol.x): a number and a name that disagree fail
// here, before any client calls the wrong handler.
#include "vmmd/rpc/procedures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "vmmd/rpc/dispatch.h"

namespace vmmd::rpc {
namespace {

constexpr int32_t kLastNamed = 443;  // procedure_names.cc names 1..443

TEST(RemoteProcedures, EachNumberIsTheOneLibvirtGivesItsName) {
    int checked = 0;
#define VMMD_CHECK_PROC(name, number)                                                        \
    if (number <= kLastNamed) {                                                              \
        const char* libvirt = remote_procedure_name(number);                                 \
        ASSERT_NE(libvirt, nullptr) << #name;                                                \
        EXPECT_STREQ(libvirt, #name) << "procedure " << number << " in procedures.h";        \
        ++checked;                                                                           \
    }
    VMMD_REMOTE_PROCEDURES(VMMD_CHECK_PROC)
#undef VMMD_CHECK_PROC
    EXPECT_GT(checked, 40);
}

TEST(RemoteProcedures, NoNumberIsListedTwiceAndNamesRoundTrip) {
    std::vector<int32_t> numbers;
#define VMMD_COLLECT_PROC(name, number)                  \
    numbers.push_back(number);                           \
    EXPECT_STREQ(name_of(Proc::name), #name);            \
    EXPECT_EQ(number_of(Proc::name), number);
    VMMD_REMOTE_PROCEDURES(VMMD_COLLECT_PROC)
#undef VMMD_COLLECT_PROC
    std::vector<int32_t> sorted = numbers;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
    EXPECT_EQ(sorted, numbers) << "keep the table in the order of the numbers";
}

TEST(RemoteProcedures, AHandlerMadeFromTheTableCarriesItsNumberAndName) {
    Procedure p(Proc::DOMAIN_MIGRATE_PREPARE3_PARAMS, Access::write, [](Caller&, xdr::Reader&) { return ok(); });
    EXPECT_EQ(p.number, 303);
    EXPECT_STREQ(p.name, "DOMAIN_MIGRATE_PREPARE3_PARAMS");
}

}  // namespace
}  // namespace vmmd::rpc

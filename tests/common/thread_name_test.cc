#include "vmm/common/thread_name.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace vmm {
namespace {

std::string named_in_a_thread(std::string_view name) {
    std::string seen;
    std::thread([&] {
        name_this_thread(name);
        seen = this_thread_name();
    }).join();
    return seen;
}

TEST(ThreadName, NamesTheCallingThreadOnly) {
    std::string before = this_thread_name();
    EXPECT_EQ(named_in_a_thread("vcpu0"), "vcpu0");
    EXPECT_EQ(this_thread_name(), before);
}

TEST(ThreadName, CutsNamesTheKernelCannotHold) {
    EXPECT_EQ(named_in_a_thread("migration-incoming-lane-12"), "migration-incom");
    EXPECT_EQ(named_in_a_thread("exactly-15-char"), "exactly-15-char");
}

}  // namespace
}  // namespace vmm

// The KVM layer (vmm/kvm/) against the kernel: the system, VM and vCPU ioctls answer as the
// API documentation says, and what the kernel refuses comes back as one line naming the ioctl
// and the errno text, never a crash. The machine tests (tests/machine/) boot guests on top.
#include "vmm/kvm/system.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include "tests/support/require.h"
#include "vmm/common/mapping.h"
#include "vmm/kvm/vm.h"

namespace vmm::kvm {
namespace {

constexpr size_t k2M = 2u << 20;

TEST(KvmSystem, AMissingDeviceSaysWhatToDo) {
    auto sys = System::open("/nonexistent/kvm");
    ASSERT_FALSE(sys);
    const std::string& m = sys.error().message();
    EXPECT_NE(m.find("/nonexistent/kvm"), std::string::npos) << m;
    EXPECT_NE(m.find("modprobe"), std::string::npos) << m;
}

TEST(KvmSystem, TheDeviceSpeaksApi12AndDescribesWhatAGuestMayUse) {
    VMM_REQUIRE(need::kvm());
    auto sys = System::open();
    ASSERT_TRUE(sys) << sys.error().message();
    EXPECT_EQ(sys->api_version(), KVM_API_VERSION);
    auto run = sys->vcpu_mmap_size();
    ASSERT_TRUE(run) << run.error().message();
    EXPECT_GE(*run, sizeof(kvm_run));
    EXPECT_EQ(*run % 4096, 0u);
    auto cpuid = sys->supported_cpuid();
    ASSERT_TRUE(cpuid) << cpuid.error().message();
    EXPECT_FALSE(cpuid->empty());
    auto msrs = sys->msr_index_list();
    ASSERT_TRUE(msrs) << msrs.error().message();
    EXPECT_FALSE(msrs->empty());
    EXPECT_GT(sys->check_extension(KVM_CAP_USER_MEMORY), 0);
    EXPECT_EQ(sys->check_extension(-12345), 0) << "an unknown capability is absent, not an error";
}

// Guest RAM in two slots: the kernel takes disjoint ones and refuses an overlap, and the
// refusal names the ioctl. A fresh slot under dirty logging has nothing dirty.
TEST(KvmVm, SlotsDirtyLogAndVcpusAnswerAsTheKernelSays) {
    VMM_REQUIRE(need::kvm());
    auto sys = System::open();
    ASSERT_TRUE(sys) << sys.error().message();
    auto vm = sys->create_vm();
    ASSERT_TRUE(vm) << vm.error().message();
    auto ram = Mapping::map("guest ram", 2 * k2M, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    ASSERT_TRUE(ram) << ram.error().message();
    auto host = reinterpret_cast<uint64_t>(ram->data());
    kvm_userspace_memory_region low{0, KVM_MEM_LOG_DIRTY_PAGES, 0, k2M, host};
    kvm_userspace_memory_region high{1, 0, k2M, k2M, host + k2M};
    ASSERT_TRUE(vm->set_user_memory_region(low));
    ASSERT_TRUE(vm->set_user_memory_region(high));
    kvm_userspace_memory_region overlap{2, 0, k2M / 2, k2M, host};
    auto refused = vm->set_user_memory_region(overlap);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message().find("KVM_SET_USER_MEMORY_REGION"), std::string::npos) << refused.error().message();

    std::vector<uint64_t> bitmap(k2M / 4096 / 64, ~uint64_t{0});
    ASSERT_TRUE(vm->get_dirty_log(0, bitmap.data()));
    for (uint64_t w : bitmap) EXPECT_EQ(w, 0u) << "no guest ran: nothing is dirty";
    EXPECT_FALSE(vm->get_dirty_log(1, bitmap.data())) << "slot 1 does not log dirty pages";

    auto run = sys->vcpu_mmap_size();
    ASSERT_TRUE(run);
    auto vcpu = vm->create_vcpu(0, *run);
    ASSERT_TRUE(vcpu) << vcpu.error().message();
    auto again = vm->create_vcpu(0, *run);
    ASSERT_FALSE(again) << "a second vCPU 0";
    EXPECT_NE(again.error().message().find("KVM_CREATE_VCPU"), std::string::npos) << again.error().message();
}

}  // namespace
}  // namespace vmm::kvm

#include <gtest/gtest.h>

#include "vmm/machine/vcpu_state.h"

namespace vmm::machine {

namespace {
VcpuState sample() {
    VcpuState s;
    s.regs.rip = 0x100000;
    s.regs.rsp = 0x7000;
    s.regs.rflags = 0x202;
    s.sregs.cr0 = 0x80050033;
    s.sregs.efer = 0x500;
    s.fpu.fcw = 0x37f;
    s.xsave.assign(4096, 0);
    s.xsave[512] = 7;
    s.xcrs.nr_xcrs = 1;
    s.xcrs.xcrs[0].value = 3;
    s.msrs = {{kMsrTsc, 0, 123456789}, {0xc0000081, 0, 42}};
    s.events.exception.injected = 1;
    s.mp_state.mp_state = KVM_MP_STATE_RUNNABLE;
    s.debugregs.dr7 = 0x400;
    return s;
}
}  // namespace

TEST(VcpuStateCodec, RoundTripsEveryField) {
    VcpuState s = sample();
    ByteWriter w;
    encode_vcpu_state(w, s);
    ByteReader r(w.bytes(), "vcpu");
    auto back = decode_vcpu_state(r);
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_TRUE(r.expect_end());
    EXPECT_TRUE(same_state(s, *back, false));
}

TEST(VcpuStateCodec, SameStateCanIgnoreOnlyTheTsc) {
    VcpuState a = sample(), b = sample();
    b.msrs[0].data += 1000;
    EXPECT_FALSE(same_state(a, b, false));
    EXPECT_TRUE(same_state(a, b, true));
    b.msrs[1].data += 1;
    EXPECT_FALSE(same_state(a, b, true));
    EXPECT_EQ(first_difference(a, b, true), "MSR 0xc0000081: 0x2a vs 0x2b");
    VcpuState c = sample(), d = sample();
    c.msrs.push_back({kMsrHvTimeRefCount, 0, 100});
    d.msrs.push_back({kMsrHvTimeRefCount, 0, 900});
    EXPECT_TRUE(same_state(c, d, true));  // the Hyper-V reference counter is a clock too
    c.msrs.push_back({kMsrHvVpRuntime, 0, 5});
    d.msrs.push_back({kMsrHvVpRuntime, 0, 7});
    EXPECT_TRUE(same_state(c, d, true));  // and so is the vCPU run-time counter (seen under stock KVM)
}

TEST(VcpuStateCodec, RejectsTruncationWrongStructSizesAndHugeCounts) {
    ByteWriter w;
    encode_vcpu_state(w, sample());
    const auto& good = w.bytes();
    for (size_t cut : {size_t{0}, size_t{3}, good.size() / 2, good.size() - 1}) {
        std::vector<uint8_t> t(good.begin(), good.begin() + static_cast<long>(cut));
        ByteReader r(t, "vcpu");
        EXPECT_FALSE(decode_vcpu_state(r)) << cut;
    }
    std::vector<uint8_t> bad = good;
    bad[4] = static_cast<uint8_t>(sizeof(kvm_regs) - 1);  // regs blob length
    ByteReader r(bad, "vcpu");
    auto res = decode_vcpu_state(r);
    ASSERT_FALSE(res);
    EXPECT_NE(res.error().message().find("regs"), std::string::npos);
    ByteWriter many;
    many.put(uint32_t{1});
    VcpuState s = sample();
    s.msrs.resize(2000);
    encode_vcpu_state(many, s);
    std::vector<uint8_t> m(many.bytes().begin() + 4, many.bytes().end());
    ByteReader mr(m, "vcpu");
    auto mres = decode_vcpu_state(mr);
    ASSERT_FALSE(mres);
    EXPECT_NE(mres.error().message().find("exceeds the limit"), std::string::npos);
}

}  // namespace vmm::machine

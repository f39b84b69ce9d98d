#include "vmm/migration/precopy/machine_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace vmm::migration {

Result<std::vector<uint8_t>> save_machine_state(machine::Machine& m) {
    auto vcpus = m.save_vcpus();
    if (!vcpus) return vcpus.error();
    ByteWriter w;
    w.put(static_cast<uint32_t>(vcpus->size()));
    for (const auto& v : *vcpus) machine::encode_vcpu_state(w, v);
    m.save_devices(w);
    return std::move(w).take();
}

StreamHeader header_for(const machine::Machine& m, RamMode mode) {
    StreamHeader h;
    h.vcpu_count = static_cast<uint32_t>(m.vcpus().count());
    for (const auto& b : m.memory().blocks()) h.blocks.push_back({b->name(), b->guest_addr(), b->size()});
    h.ram_mode = mode;
    return h;
}

TransportContext context_for(const machine::Machine& m, const Uri& uri, std::function<Options()> options,
                             const stream::CancelToken& cancel) {
    TransportContext ctx;
    ctx.uri = uri;
    ctx.options = std::move(options);
    ctx.cancel = &cancel;
    ctx.vcpu_count = static_cast<uint32_t>(m.vcpus().count());
    for (const auto& b : m.memory().blocks()) ctx.blocks.push_back({b->name(), b->host(), b->size(), b->guest_addr()});
    return ctx;
}

Status load_machine_state(machine::Machine& m, std::span<const uint8_t> blob) {
    ByteReader r(blob, "migrated machine state");
    uint32_t n = 0;
    if (auto s = r.get(n); !s) return s;
    if (n != m.vcpus().count()) return Error(fmt::format("migrated state has {} vCPUs, this machine {}", n, m.vcpus().count()));
    std::vector<machine::VcpuState> vcpus;
    for (uint32_t i = 0; i < n; ++i) {
        auto v = machine::decode_vcpu_state(r);
        if (!v) return v.error().context(fmt::format("vCPU {}", i));
        vcpus.push_back(std::move(*v));
    }
    // Devices validate their own sections; load them last so a bad vCPU section changes nothing.
    if (auto s = m.load_vcpus(vcpus); !s) return s;
    if (auto s = m.load_devices(r); !s) return s;
    return r.expect_end();
}

Result<uint32_t> rehearse_handover(machine::Machine& m) {
    auto t = std::chrono::steady_clock::now();
    auto state = save_machine_state(m);
    if (!state) return state.error().context("rehearsing the switchover: saving this machine's own state");
    if (auto s = load_machine_state(m, *state); !s) {
        return s.error().context("rehearsing the switchover: loading this machine's own state");
    }
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t).count();
    return static_cast<uint32_t>(std::min<int64_t>(us, UINT32_MAX));
}

}  // namespace vmm::migration

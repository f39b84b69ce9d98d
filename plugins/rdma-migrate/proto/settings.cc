#include "proto/settings.h"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cstring>
#include <string_view>

#include "vmm/common/units.h"

namespace rdma_migrate {

namespace {

using Apply = void (*)(TransportSettings&, uint64_t);

struct Row {
    vmm_setting abi;
    Apply apply;
};

constexpr uint64_t kMiB = 1 << 20;

const Row kRows[] = {
    {{"rdma-pin-all",
      "rdma, both sides: register all guest RAM once, before the first round (the spec's pin-all), instead of "
      "registering chunks as they are first written; granted only where all of it can be pinned (RLIMIT_MEMLOCK)",
      VMM_SETTING_CAPABILITY, 0, 0, 1, 0},
     [](TransportSettings& s, uint64_t v) { s.pin_all = v != 0; }},
    {{"x-rdma-chunk-size",
      "rdma: the unit RAM is registered and written in, bytes, a power of two from 1M to 1G (QEMU 11.1's name and "
      "range; default 1M, the spec's): larger chunks mean fewer registrations. Between vmm and vmm the destination "
      "takes the source's size unless it was given one of its own, which must then be the same; QEMU cannot tell "
      "its size, so set the same on both ends, as QEMU asks",
      VMM_SETTING_SIZE, VMM_SETTING_F_POWER_OF_TWO, kMiB, 1 << 30, kMiB},
     [](TransportSettings& s, uint64_t v) {
         s.chunk_size = v;
         s.chunk_size_set = true;
     }},
    {{"rdma-pin-limit",
      "rdma: bytes of RAM each side keeps registered at once, the least recently used chunks unregistered to stay "
      "under it (0 = unlimited; at least one chunk)",
      VMM_SETTING_SIZE, 0, 0, UINT64_MAX, 0},
     [](TransportSettings& s, uint64_t v) { s.pin_limit = v; }},
    {{"rdma-channels", "rdma: queue pairs the chunks are striped over (chunk c on channel c mod N), 1 to 16",
      VMM_SETTING_INTEGER, 0, 1, 16, 1},
     [](TransportSettings& s, uint64_t v) { s.channels = static_cast<uint32_t>(v); }},
    {{"x-rdma-postcopy-read",
      "rdma, both sides, with postcopy-ram: after the switch the destination reads each missing page from the "
      "source's RAM by RDMA READ, and the source's CPU never hears of the fault (else the destination asks with a "
      "SEND and the source answers with a WRITE); not with verify-ram, whose pages come with their sums (with "
      "tls-creds each page read is checked against a tag the source made)",
      VMM_SETTING_CAPABILITY, 0, 0, 1, 0},
     [](TransportSettings& s, uint64_t v) { s.postcopy_read = v != 0; }},
    {{"x-rdma-postcopy-read-push",
      "rdma, source, with x-rdma-postcopy-read: the destination also reads the background push itself, by RDMA "
      "READ, at max-postcopy-bandwidth as set when the migration connected, and the source writes none of those "
      "pages (else the source writes the push); the destination's side needs nothing but x-rdma-postcopy-read",
      VMM_SETTING_CAPABILITY, 0, 0, 1, 0},
     [](TransportSettings& s, uint64_t v) { s.postcopy_read_push = v != 0; }},
    {{"x-rdma-postcopy-read-wait",
      "rdma, destination, with x-rdma-postcopy-read: microseconds the fault thread polls for its own READ of a "
      "faulted page, and then places the page itself, before it leaves the READ to the receiving thread, which its "
      "completion must wake (0: never; the wait is at most four times what READs have been taking)",
      VMM_SETTING_INTEGER, 0, 0, 100000, 1000},
     [](TransportSettings& s, uint64_t v) { s.postcopy_read_wait_us = static_cast<uint32_t>(v); }},
};

constexpr size_t kCount = sizeof kRows / sizeof kRows[0];

const Row* row_named(const char* name) {
    for (const Row& r : kRows)
        if (name != nullptr && std::strcmp(r.abi.name, name) == 0) return &r;
    return nullptr;
}

// A value as vmm passes it (decimal) or as an older vmm passed it (as typed: "2M").
Result<uint64_t> value_of(const vmm_setting& row, const char* text) {
    std::string_view t = text != nullptr ? text : "";
    if (row.kind == VMM_SETTING_CAPABILITY) {
        if (t == "on") return 1;
        if (t == "off") return 0;
        return Error(fmt::format("capability '{}': '{}' is neither on nor off", row.name, t));
    }
    auto v = vmm::parse_size(t);
    bool pow2 = (row.flags & VMM_SETTING_F_POWER_OF_TWO) != 0;
    if (v && *v >= row.min && *v <= row.max && (!pow2 || std::has_single_bit(*v))) return *v;
    return Error(fmt::format("migration parameter '{}' must be {}from {} to {}, got '{}'", row.name,
                             pow2 ? "a power of two " : "", row.min, row.max, t));
}

Status apply(const vmm_kv* kv, uint32_t count, bool capabilities, TransportSettings& out) {
    for (uint32_t i = 0; i < count; ++i) {
        const Row* r = row_named(kv[i].name);
        if (r == nullptr || (r->abi.kind == VMM_SETTING_CAPABILITY) != capabilities) {
            return Error(fmt::format("rdma transport: no {} named '{}'", capabilities ? "capability" : "parameter",
                                     kv[i].name != nullptr ? kv[i].name : "(null)"));
        }
        auto v = value_of(r->abi, kv[i].value);
        if (!v) return v.error();
        r->apply(out, *v);
    }
    return {};
}

}  // namespace

const vmm_setting* setting_rows() {
    static const std::array<vmm_setting, kCount + 1> rows = [] {
        std::array<vmm_setting, kCount + 1> a{};
        for (size_t i = 0; i < kCount; ++i) a[i] = kRows[i].abi;
        return a;  // the last row's name is null
    }();
    return rows.data();
}

Result<TransportSettings> read_settings(const vmm_kv* caps, uint32_t cap_count, const vmm_kv* params,
                                        uint32_t param_count) {
    TransportSettings out;
    for (const Row& r : kRows)
        if (r.abi.kind != VMM_SETTING_CAPABILITY || r.abi.fallback != 0) r.apply(out, r.abi.fallback);
    out.chunk_size_set = false;  // the fallback was applied, not told
    if (auto s = apply(caps, cap_count, true, out); !s) return s.error();
    if (auto s = apply(params, param_count, false, out); !s) return s.error();
    return out;
}

}  // namespace rdma_migrate

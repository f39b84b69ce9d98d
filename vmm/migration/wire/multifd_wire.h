// The hellos of a migration over several connections (docs/migration-stream.md, "Multifd").
// With the `multifd` capability the source opens the main connection and then
// `multifd-channels` lane connections to the same address; with `postcopy-preempt`, one more
// after them, for the pages postcopy's faults wait on. The main connection starts with a
// preface that announces them; each lane starts with a hello that names its index, the preempt
// connection with its own. All carry the session id the source drew at random, so the
// destination refuses a connection that belongs to no migration of its.
// 24 bytes each, little-endian: magic[8], u32 version, u32 value, u64 session. The preface's
// value: lanes (0..16) | kPrefacePreempt; a lane's: its index; the preempt hello's: 0.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "vmm/common/result.h"

namespace vmm::migration {

constexpr uint32_t kMultifdVersion = 1;
constexpr uint32_t kMaxLanes = 16;
constexpr size_t kHelloSize = 24;
constexpr std::array<uint8_t, 8> kPrefaceMagic = {'V', 'M', 'M', 'M', 'U', 'L', 'T', 0x0a};
constexpr std::array<uint8_t, 8> kLaneMagic = {'V', 'M', 'M', 'L', 'A', 'N', 'E', 0x0a};
constexpr std::array<uint8_t, 8> kPreemptMagic = {'V', 'M', 'M', 'P', 'R', 'M', 'T', 0x0a};
constexpr uint32_t kPrefacePreempt = 1u << 16;  // in a preface's value: a preempt connection follows

struct Hello {
    enum class Kind { preface, lane, preempt } kind = Kind::preface;
    // preface: lane count (0..kMaxLanes, 0 only with kPrefacePreempt) | kPrefacePreempt;
    // lane: its index (< lane count); preempt: 0
    uint32_t value = 0;
    uint64_t session = 0;
    uint32_t lanes() const { return value & 0xffff; }  // a preface's
    bool preempt() const { return (value & kPrefacePreempt) != 0; }
};

std::array<uint8_t, kHelloSize> encode_hello(const Hello& h);
// Checks magic, version and the range of `value` (an index is checked against the lane count
// by the caller, which knows it).
Result<Hello> decode_hello(std::span<const uint8_t, kHelloSize> bytes);
// Whether the first bytes of a connection are a multifd preface (else: an ordinary stream).
bool starts_with_preface(std::span<const uint8_t, 8> first);
// A random session id (getrandom).
Result<uint64_t> new_session_id();

}  // namespace vmm::migration

// Pulling (ours, kCapPull; docs/rdma-protocol.md, "Pulling a saved guest"): a server serves a
// saved guest's file, mapped read-only and registered for remote read, and a client reads any of
// it with RDMA READ. The client connects with kCapPull in its private data (a server refuses
// any other request, an RDMA migration destination refuses a pull); once connected the server
// SENDs one OFFER, and the client SENDs how much it has read now and then, and DONE before it
// hangs up. Nothing else travels: the reads cost the server's CPU nothing.
//
// Messages, kPullMessageSize bytes each (network order):
//   OFFER  {type 1, version u32, length u64, address u64, rkey u32, reads u32}  server → client
//          (`reads`: the READs at once the server's queue pair takes)
//   PULLED {type 2, 0 u32, bytes u64, 0...}                                      client → server
//   DONE   {type 3, 0 u32, bytes u64, 0...}                                      client → server
// `bytes` counts what the client has read so far; it never goes down.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vmm/common/result.h"

namespace rdma_migrate {

constexpr uint32_t kPullVersion = 1;
constexpr size_t kPullMessageSize = 40;
// What one client may be served at most (a saved guest is far smaller): bounds every length.
constexpr uint64_t kPullMaxLength = 1ull << 46;

enum class PullType : uint32_t { offer = 1, pulled = 2, done = 3 };

struct PullMessage {
    PullType type = PullType::offer;
    // offer
    uint32_t version = kPullVersion;
    uint64_t length = 0, address = 0;
    uint32_t rkey = 0, reads = 1;
    // pulled, done
    uint64_t bytes = 0;
};

std::vector<uint8_t> encode_pull_message(const PullMessage& m);
// Exactly kPullMessageSize bytes, a known type, an offer of this version with a length in
// (0, kPullMaxLength], an address that does not wrap and 1..255 reads; padding must be zero.
vmm::Result<PullMessage> decode_pull_message(std::span<const uint8_t> bytes);

}  // namespace rdma_migrate

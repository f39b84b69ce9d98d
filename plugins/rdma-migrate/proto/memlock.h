// Locked memory (spec TODO 1): ibv_reg_mr pins the pages it registers and charges them to
// RLIMIT_MEMLOCK unless the process holds CAP_IPC_LOCK. Each side checks what its mode will pin
// before it pins anything, so that a low limit gives one actionable line instead of QEMU's
// "cannot get rkey" halfway through:
//   - the source refuses to connect when the mode it was asked for cannot fit;
//   - the destination does not grant rdma-pin-all when all of its RAM cannot fit (the spec: it
//     answers with the capabilities it supports), and the source then registers dynamically.
#pragma once

#include <cstdint>
#include <string>

#include "vmm/common/result.h"

namespace rdma_migrate {

using vmm::Status;

struct MemlockBudget {
    bool unlimited = true;  // RLIM_INFINITY or CAP_IPC_LOCK
    uint64_t limit = 0;     // bytes, when not unlimited
};

// This process's budget.
MemlockBudget memlock_budget();

// What one side pins at most: the control buffers, plus all RAM (pin-all, or registering
// dynamically without a pin limit: every chunk the guest touched) or the pin limit.
uint64_t memlock_need(uint64_t ram, bool pin_all, uint64_t pin_limit);

// Source: an error naming the limit, the need and the way out when the budget is short.
Status check_source_memlock(const MemlockBudget& b, uint64_t ram, bool pin_all, uint64_t pin_limit);

// Destination: why it cannot grant rdma-pin-all for `ram` bytes under `b`; empty when it can.
std::string pin_all_refusal(const MemlockBudget& b, uint64_t ram);

}  // namespace rdma_migrate

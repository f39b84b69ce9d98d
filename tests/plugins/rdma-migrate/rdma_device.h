// The RDMA device the `rdma` tests run on: its address is $VMM_RDMA_ADDR (the SoftRoCE VM sets
// it, scripts/lib/softroce-inside.sh); without one they skip and say how to run them.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/support/vm_pair.h"

namespace vmm::test {

inline std::string rdma_addr() {
    const char* a = std::getenv("VMM_RDMA_ADDR");
    return a != nullptr ? a : "";
}

// rdma:ADDR:PORT on the device, at a port free now.
inline std::string rdma_uri() { return "rdma:" + rdma_addr() + ":" + std::to_string(free_tcp_port()); }

}  // namespace vmm::test


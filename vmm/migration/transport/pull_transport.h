// The scheme "<transport>-pull" (pull.h): a transport that can pull (rdma), used the other way
// round. Only a destination uses it: `vmm --incoming rdma-pull:HOST:PORT` connects to the server
// there and restores the guest it serves, lazily (the guest runs at once).
#pragma once

#include <memory>

#include "vmm/migration/transport/transport.h"

namespace vmm::migration {

// `base` pulls (base.pulls()) and outlives what this returns.
std::unique_ptr<Transport> make_pull_transport(Transport& base);

}  // namespace vmm::migration

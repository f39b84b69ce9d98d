// The remote program's procedures that start, stop, pause and resume domains: create (from a
// definition or from XML), destroy, shutdown, suspend, resume (docs/libvirt.md lists them).
#pragma once

#include <vector>

#include "vmmd/domain/domain_store.h"
#include "vmmd/rpc/dispatch.h"
#include "vmmd/runtime/supervisor.h"

namespace vmmd {

std::vector<rpc::Procedure> lifecycle_procedures(DomainStore& store, Supervisor& supervisor,
                                                 DomainStore::UuidSource random_uuid);

}  // namespace vmmd

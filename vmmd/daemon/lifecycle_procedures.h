// The remote program's procedures that start, stop, pause and resume domains: create (from a
// definition, restoring a managed save, or from XML), destroy, shutdown, suspend, resume (docs/libvirt.md lists them).
#pragma once

#include <vector>

#include "vmmd/daemon/save_images.h"
#include "vmmd/domain/domain_store.h"
#include "vmmd/rpc/dispatch.h"
#include "vmmd/runtime/supervisor.h"

namespace vmmd {

// `images`: a start of a domain with a managed save image restores it (save_images.h).
std::vector<rpc::Procedure> lifecycle_procedures(DomainStore& store, Supervisor& supervisor,
                                                 DomainStore::UuidSource random_uuid, SaveImages& images);

}  // namespace vmmd

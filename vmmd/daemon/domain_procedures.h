// The remote program's domain procedures that need no running guest: define and undefine,
// lookups, lists, the XML, info and state (docs/libvirt.md lists them with their numbers).
#pragma once

#include <vector>

#include "vmmd/domain/domain_store.h"
#include "vmmd/rpc/dispatch.h"
#include "vmmd/runtime/supervisor.h"

namespace vmmd {

// `events` hears of definitions added, updated and removed (lifecycle DEFINED / UNDEFINED).
std::vector<rpc::Procedure> domain_procedures(DomainStore& store, DomainStore::UuidSource random_uuid,
                                              Supervisor::Listener events);

}  // namespace vmmd

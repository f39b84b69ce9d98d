// The remote program's domain procedures that need no running guest: define and undefine,
// lookups, lists, the XML, info and state (docs/libvirt.md lists them with their numbers).
#pragma once

#include <functional>
#include <vector>

#include "vmmd/domain/domain_store.h"
#include "vmmd/rpc/dispatch.h"
#include "vmmd/runtime/supervisor.h"

namespace vmmd {

// The managed save images (SaveImages): whether a domain has one (list --with-managed-save), and
// before an undefine whether it may go, given whether the client asked to remove the image too.
struct ManagedSaves {
    std::function<bool(const DomainDef& def)> exists;
    std::function<vmm::Status(const DomainDef& def, bool remove_image)> undefining;
    // A running domain's CPU time so far in ns (Supervisor::cpu_time_ns), for dominfo.
    std::function<uint64_t(const Uuid& uuid)> cpu_time_ns;
};
// `events` hears of definitions added, updated and removed (lifecycle DEFINED / UNDEFINED).
std::vector<rpc::Procedure> domain_procedures(DomainStore& store, DomainStore::UuidSource random_uuid,
                                              Supervisor::Listener events, ManagedSaves managed = {},
                                              std::string emulator = {});

}  // namespace vmmd

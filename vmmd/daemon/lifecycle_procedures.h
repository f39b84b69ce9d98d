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
                                                 DomainStore::UuidSource random_uuid, SaveImages& images,
                                                 std::string emulator = {});

// Starts each persistent domain marked autostart that does not run (restoring a managed save
// image where it has one), once per boot of the host, as libvirt does: `marker` keeps the boot id
// (/proc/sys/kernel/random/boot_id) of the vmmd start that did it, so a vmmd restarted in the same
// boot (after a crash or an upgrade) starts nothing: a domain stopped, or migrated away, since
// then stays where it is. Each failure is logged; the rest still start.
void autostart_domains(DomainStore& store, Supervisor& supervisor, SaveImages& images, const std::string& marker);

}  // namespace vmmd

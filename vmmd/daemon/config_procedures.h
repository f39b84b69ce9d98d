// The procedures that change a domain's definition in part, as libvirt's do: its title,
// description and others' metadata (virsh desc, metadata) and its memory (setmem, setmaxmem),
// each on the running domain (live), its persistent definition (config) or both.
#pragma once

#include <vector>

#include "vmmd/domain/domain_store.h"
#include "vmmd/rpc/dispatch.h"

namespace vmmd {

std::vector<rpc::Procedure> config_procedures(DomainStore& store);

}  // namespace vmmd

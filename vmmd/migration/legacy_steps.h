// libvirt's version-3 migration steps without typed parameters (DOMAIN_MIGRATE_BEGIN3,
// PREPARE3, PERFORM3, FINISH3, CONFIRM3: what virDomainMigrate and virDomainMigrate2, and so
// libvirt-python's dom.migrate(), send), rewritten as the same steps with parameters
// (..._PARAMS), which vmmd serves: each function reads one step's arguments and gives the
// arguments of its _PARAMS twin (uri, dname, the destination XML and the bandwidth become
// libvirt's migration parameters). Pure, so a fuzz target feeds it.
#pragma once

#include <cstdint>
#include <vector>

#include "vmm/common/result.h"
#include "vmmd/xdr/xdr.h"

namespace vmmd {

vmm::Result<std::vector<uint8_t>> begin3_as_params(xdr::Reader& legacy);
vmm::Result<std::vector<uint8_t>> prepare3_as_params(xdr::Reader& legacy);
vmm::Result<std::vector<uint8_t>> perform3_as_params(xdr::Reader& legacy);
vmm::Result<std::vector<uint8_t>> finish3_as_params(xdr::Reader& legacy);
vmm::Result<std::vector<uint8_t>> confirm3_as_params(xdr::Reader& legacy);

}  // namespace vmmd

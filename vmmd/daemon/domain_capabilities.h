// What a domain of this driver can be (virsh domcapabilities, CONNECT_GET_DOMAIN_CAPABILITIES) and
// which named CPU models it offers (virsh cpu-models, CONNECT_GET_CPU_MODEL_NAMES): the questions
// virt-manager, virt-install and Nova ask before they write a domain's XML. True to vmm: the host's
// CPU passed through (KVM's supported CPUID), no named models, no devices beyond a serial file.
#pragma once

#include <string>
#include <vector>

#include "vmmd/daemon/connect_procedures.h"
#include "vmmd/rpc/dispatch.h"

namespace vmmd {

inline constexpr unsigned kMaxVcpus = 255;  // what <vcpu> takes (domain_xml.cc)

std::string domain_capabilities_xml(const std::string& emulator);
std::vector<rpc::Procedure> capability_procedures(const DriverIdentity& id);

}  // namespace vmmd

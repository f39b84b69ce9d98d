#include "vmmd/daemon/domain_capabilities.h"

#include <fmt/format.h>
#include <libvirt/virterror.h>

#include <filesystem>

#include "vmmd/daemon/domain_args.h"
#include "vmmd/domain/domain_xml.h"

namespace vmmd {

namespace {

using rpc::Access;
using rpc::Caller;
using rpc::Proc;
using rpc::Reply;
using xdr::Reader;

// A refusal when a given value is not this driver's, else nullopt.
std::optional<Reply> not_ours(const std::optional<std::string>& given, const std::string& ours, const char* what) {
    if (!given || *given == ours) return std::nullopt;
    return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("{} '{}': the vmm driver has '{}' only", what, *given, ours));
}

Reply domain_capabilities(const DriverIdentity& id, Reader& a) {
    auto emulator = a.optional_string(rpc::kMaxString);
    auto arch = a.optional_string(rpc::kMaxString);
    auto machine = a.optional_string(rpc::kMaxString);
    auto virttype = a.optional_string(rpc::kMaxString);
    auto flags = a.u32();
    if (!emulator || !arch || !machine || !virttype || !flags) return undecodable("CONNECT_GET_DOMAIN_CAPABILITIES");
    if (*flags != 0) return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("CONNECT_GET_DOMAIN_CAPABILITIES: flags {:#x} (none)", *flags));
    if (auto r = not_ours(*virttype, "vmm", "virttype")) return *r;
    if (auto r = not_ours(*arch, "x86_64", "arch")) return *r;
    if (auto r = not_ours(*machine, "vmm", "machine")) return *r;
    if (*emulator) {
        std::error_code ec;
        if (!std::filesystem::equivalent(**emulator, id.emulator, ec) || ec) {
            return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("emulator '{}': this vmmd runs {}", **emulator, id.emulator));
        }
    }
    return rpc::ok_string(domain_capabilities_xml(id.emulator));
}

// No named CPU models: a vmm guest gets the host's CPU (KVM's supported CPUID), host-passthrough.
// libvirt's answer of none means "any model is accepted", the opposite: so it is a refusal.
Reply cpu_model_names(Reader& a) {
    auto arch = a.string(rpc::kMaxString);
    auto need = a.i32();
    auto flags = a.u32();
    if (!arch || !need || !flags) return undecodable("CONNECT_GET_CPU_MODEL_NAMES");
    if (*arch != "x86_64") return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("arch '{}': the vmm driver runs x86_64 guests", *arch));
    return rpc::fail(VIR_ERR_OPERATION_UNSUPPORTED, "the vmm driver has no named CPU models: a vmm guest gets the host's CPU "
                                                    "(host-passthrough, as domcapabilities says)");
}

}  // namespace

std::string domain_capabilities_xml(const std::string& emulator) {
    return fmt::format(
        "<domainCapabilities>\n"
        "  <path>{}</path>\n"
        "  <domain>vmm</domain>\n"
        "  <machine>vmm</machine>\n"
        "  <arch>x86_64</arch>\n"
        "  <vcpu max='{}'/>\n"
        "  <iothreads supported='no'/>\n"
        "  <os supported='yes'>\n"
        "    <loader supported='no'/>\n"
        "  </os>\n"
        "  <cpu>\n"
        "    <mode name='host-passthrough' supported='yes'>\n"
        "      <enum name='hostPassthroughMigratable'>\n"
        "        <value>off</value>\n"
        "      </enum>\n"
        "    </mode>\n"
        "    <mode name='maximum' supported='no'/>\n"
        "    <mode name='host-model' supported='no'/>\n"
        "    <mode name='custom' supported='no'/>\n"
        "  </cpu>\n"
        "  <memoryBacking supported='no'/>\n"
        "  <devices>\n"
        "    <disk supported='no'/>\n"
        "    <graphics supported='no'/>\n"
        "    <video supported='no'/>\n"
        "    <hostdev supported='no'/>\n"
        "    <rng supported='no'/>\n"
        "    <filesystem supported='no'/>\n"
        "    <tpm supported='no'/>\n"
        "    <redirdev supported='no'/>\n"
        "    <channel supported='no'/>\n"
        "    <crypto supported='no'/>\n"
        "  </devices>\n"
        "  <features>\n"
        "    <gic supported='no'/>\n"
        "    <vmcoreinfo supported='no'/>\n"
        "    <genid supported='no'/>\n"
        "    <backingStoreInput supported='no'/>\n"
        "    <backup supported='no'/>\n"
        "    <sev supported='no'/>\n"
        "  </features>\n"
        "</domainCapabilities>\n",
        xml_escape(emulator), kMaxVcpus);
}

std::vector<rpc::Procedure> capability_procedures(const DriverIdentity& id) {
    return {
        {Proc::CONNECT_GET_CPU_MODEL_NAMES, Access::read_only, [](Caller&, Reader& a) { return cpu_model_names(a); }},
        {Proc::CONNECT_GET_DOMAIN_CAPABILITIES, Access::read_only, [id](Caller&, Reader& a) { return domain_capabilities(id, a); }},
    };
}

}  // namespace vmmd

#include "vmmd/daemon/domain_capabilities.h"

#include <fmt/format.h>
#include <libvirt/virterror.h>

#include <filesystem>

#include "vmmd/domain/domain_args.h"
#include "vmmd/domain/cpu_xml.h"
#include "vmmd/domain/domain_xml.h"

namespace vmmd {

namespace {

using rpc::Access;
using rpc::Caller;
using rpc::Proc;
using rpc::Reply;
using xdr::Reader;

constexpr size_t kMaxBaselineCpus = 256;  // REMOTE_CPU_BASELINE_MAX

// A refusal when a given value is not this driver's, else nullopt.
std::optional<Reply> not_ours(const std::optional<std::string>& given, const std::string& ours, const char* what) {
    if (!given || *given == ours) return std::nullopt;
    return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("{} '{}': the vmm driver has '{}' only", what, *given, ours));
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

// The driver's own checks of a CPU call's emulator, arch, machine and virttype (each may be absent).
std::optional<Reply> not_this_driver(const DriverIdentity& id, Reader& a, const char* proc) {
    auto emulator = a.optional_string(rpc::kMaxString);
    auto arch = a.optional_string(rpc::kMaxString);
    auto machine = a.optional_string(rpc::kMaxString);
    auto virttype = a.optional_string(rpc::kMaxString);
    if (!emulator || !arch || !machine || !virttype) return undecodable(proc);
    if (auto r = not_ours(*virttype, "vmm", "virttype")) return r;
    if (auto r = not_ours(*arch, "x86_64", "arch")) return r;
    if (auto r = not_ours(*machine, "vmm", "machine")) return r;
    std::error_code ec;
    if (*emulator && (!std::filesystem::equivalent(**emulator, id.emulator, ec) || ec)) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("emulator '{}': this vmmd runs {}", **emulator, id.emulator));
    }
    return std::nullopt;
}

Reply domain_capabilities(const DriverIdentity& id, Reader& a) {
    if (auto r = not_this_driver(id, a, "CONNECT_GET_DOMAIN_CAPABILITIES")) return *r;
    auto flags = a.u32();
    if (!flags) return undecodable("CONNECT_GET_DOMAIN_CAPABILITIES");
    if (*flags != 0) return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("CONNECT_GET_DOMAIN_CAPABILITIES: flags {:#x} (none)", *flags));
    return rpc::ok_string(domain_capabilities_xml(id.emulator));
}

// Whether this driver can give a guest the CPU described: vmm gives the host's (KVM's supported
// CPUID) and nothing else, so host-passthrough, or the host's CPU as capabilities describe it, is
// identical, and a named model, host-model or a custom feature list is what it cannot give.
Reply compare_cpu(const DriverIdentity& id, Reader& a) {
    if (auto r = not_this_driver(id, a, "CONNECT_COMPARE_HYPERVISOR_CPU")) return *r;
    auto xml = a.string(rpc::kMaxString);
    auto flags = a.u32();
    if (!xml || !flags) return undecodable("CONNECT_COMPARE_HYPERVISOR_CPU");
    uint32_t known = VIR_CONNECT_COMPARE_CPU_FAIL_INCOMPATIBLE | VIR_CONNECT_COMPARE_CPU_VALIDATE_XML;
    if ((*flags & ~known) != 0) return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("compare CPU: unknown flags {:#x}", *flags & ~known));
    auto cpu = parse_guest_cpu(*xml);
    if (!cpu) return rpc::fail(VIR_ERR_XML_ERROR, cpu.error().message());
    bool host = cpu->mode == "host-passthrough" || cpu->mode == "maximum" || (cpu->mode.empty() && !cpu->model && !cpu->features);
    if (host) return rpc::ok_i32(VIR_CPU_COMPARE_IDENTICAL);
    if (*flags & VIR_CONNECT_COMPARE_CPU_FAIL_INCOMPATIBLE) {
        return rpc::fail(VIR_ERR_CPU_INCOMPATIBLE, fmt::format("the CPU is incompatible with the vmm driver: it gives a guest the "
                                                               "host's CPU only (host-passthrough), not {}",
                                                               cpu->model ? "model " + *cpu->model : "mode " + cpu->mode));
    }
    return rpc::ok_i32(VIR_CPU_COMPARE_INCOMPATIBLE);
}

Reply baseline_cpu(const DriverIdentity& id, Reader& a) {
    if (auto r = not_this_driver(id, a, "CONNECT_BASELINE_HYPERVISOR_CPU")) return *r;
    auto count = a.count(kMaxBaselineCpus, 4);
    if (!count) return undecodable("CONNECT_BASELINE_HYPERVISOR_CPU");
    for (uint32_t i = 0; i < *count; ++i)
        if (!a.string(rpc::kMaxString)) return undecodable("CONNECT_BASELINE_HYPERVISOR_CPU");
    if (!a.u32()) return undecodable("CONNECT_BASELINE_HYPERVISOR_CPU");
    return rpc::fail(VIR_ERR_OPERATION_UNSUPPORTED, "the vmm driver has no CPU models to baseline with: a vmm guest gets its host's "
                                                    "CPU (host-passthrough), so it migrates between hosts whose CPUs match");
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
        {Proc::CONNECT_COMPARE_HYPERVISOR_CPU, Access::read_only, [id](Caller&, Reader& a) { return compare_cpu(id, a); }},
        {Proc::CONNECT_BASELINE_HYPERVISOR_CPU, Access::read_only, [id](Caller&, Reader& a) { return baseline_cpu(id, a); }},
    };
}

}  // namespace vmmd

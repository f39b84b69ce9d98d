#include "vmmd/daemon/lifecycle_procedures.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <fstream>

#include "vmm/common/log.h"
#include "vmmd/domain/domain_args.h"
#include "vmmd/domain/atomic_file.h"
#include "vmmd/domain/domain_xml.h"

namespace vmmd {

namespace {

using rpc::Proc;
using rpc::Access;
using rpc::Caller;
using rpc::Reply;
using xdr::Reader;


// Flags outside `known` are refused by name of the procedure, as libvirt's virCheckFlags does.
std::optional<Reply> unknown_flags(const char* proc, uint32_t flags, uint32_t known) {
    if ((flags & ~known) == 0) return std::nullopt;
    return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("{}: unsupported flags ({:#x})", proc, flags & ~known));
}

// Starts `def` and answers with the domain as it now is (its id). A domain with a managed save
// image is restored from it instead (`images`; with VIR_DOMAIN_START_FORCE_BOOT the image goes).
Reply start(DomainStore& store, Supervisor& sup, const DomainDef& def, bool paused, SaveImages* images = nullptr,
            bool force_boot = false) {
    if (auto now = store.by_uuid(def.uuid); now && now->active()) {
        return rpc::fail(VIR_ERR_OPERATION_INVALID, fmt::format("Requested operation is not valid: domain '{}' is already running",
                                                                 def.name));
    }
    if (images != nullptr) {
        if (auto restored = images->start_managed(def, paused, force_boot)) return *restored;
    }
    if (auto s = sup.start(def, paused); !s) return rpc::fail(VIR_ERR_OPERATION_FAILED, s.error().message());
    auto v = store.by_uuid(def.uuid);
    if (!v) return no_domain(fmt::format("domain '{}' ended as it started", def.name));
    return domain_reply(*v);
}

constexpr uint32_t kStartFlags = VIR_DOMAIN_START_PAUSED | VIR_DOMAIN_START_BYPASS_CACHE | VIR_DOMAIN_START_FORCE_BOOT |
                                 VIR_DOMAIN_START_VALIDATE;

Reply create_xml(DomainStore& store, Supervisor& sup, const DomainStore::UuidSource& random_uuid, const std::string& emulator,
                 Reader& a) {
    auto xml = a.string(rpc::kMaxString);
    auto flags = a.u32();
    if (!xml || !flags) return undecodable("DOMAIN_CREATE_XML");
    if (auto bad = unknown_flags("DOMAIN_CREATE_XML", *flags, kStartFlags)) return *bad;
    auto parsed = client_definition(*xml, random_uuid(), emulator);
    if (auto* refused = std::get_if<Reply>(&parsed)) return std::move(*refused);
    auto* def = std::get_if<DomainDef>(&parsed);
    if (auto v = store.add_transient(*def); !v) return rpc::fail(VIR_ERR_OPERATION_FAILED, v.error().message());
    Reply r = start(store, sup, *def, (*flags & VIR_DOMAIN_START_PAUSED) != 0);
    if (auto v = store.by_uuid(def->uuid); v && !v->active()) store.set_stopped(def->uuid, v->state);  // forget a failed one
    return r;
}

Reply destroy(Supervisor& sup, const DomainView& v, uint32_t flags) {
    if (auto bad = unknown_flags("DOMAIN_DESTROY_FLAGS", flags, VIR_DOMAIN_DESTROY_GRACEFUL)) return *bad;
    if (!v.active()) return not_running(v);
    if (auto s = sup.destroy(v.def.uuid, (flags & VIR_DOMAIN_DESTROY_GRACEFUL) != 0); !s) {
        return rpc::fail(VIR_ERR_OPERATION_FAILED, s.error().message());
    }
    return rpc::ok();
}

// Every shutdown mode ends the vmm in order (the payloads have no ACPI or agent to ask).
Reply shutdown(Supervisor& sup, const DomainView& v, uint32_t flags) {
    if (auto bad = unknown_flags("DOMAIN_SHUTDOWN_FLAGS", flags, VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN)) return *bad;
    if (!v.active()) return not_running(v);
    if (auto s = sup.shutdown(v.def.uuid); !s) return rpc::fail(VIR_ERR_OPERATION_FAILED, s.error().message());
    return rpc::ok();
}

Reply pause_or_resume(Supervisor& sup, const DomainView& v, bool pause) {
    if (!v.active()) return not_running(v);
    auto s = pause ? sup.suspend(v.def.uuid) : sup.resume(v.def.uuid);
    if (!s) return rpc::fail(VIR_ERR_OPERATION_INVALID, "Requested operation is not valid: " + s.error().message());
    return rpc::ok();
}

}  // namespace

std::vector<rpc::Procedure> lifecycle_procedures(DomainStore& store, Supervisor& sup, DomainStore::UuidSource random_uuid,
                                                 SaveImages& images, std::string emulator) {
    return {
        {Proc::DOMAIN_CREATE, Access::write, on_domain(store, "DOMAIN_CREATE", [&store, &sup, &images](const DomainView& v, Reader&) {
             Reply r = start(store, sup, v.def, false, &images);
             return r.error ? r : rpc::ok();  // DOMAIN_CREATE returns nothing
         })},
        {Proc::DOMAIN_CREATE_WITH_FLAGS, Access::write,
         flagged(store, "DOMAIN_CREATE_WITH_FLAGS", [&store, &sup, &images](const DomainView& v, uint32_t f) {
             if (auto bad = unknown_flags("DOMAIN_CREATE_WITH_FLAGS", f, kStartFlags)) return *bad;
             return start(store, sup, v.def, (f & VIR_DOMAIN_START_PAUSED) != 0, &images, (f & VIR_DOMAIN_START_FORCE_BOOT) != 0);
         })},
        {Proc::DOMAIN_CREATE_XML, Access::write,
         [&store, &sup, random_uuid, emulator](Caller&, Reader& a) { return create_xml(store, sup, random_uuid, emulator, a); }},
        {Proc::DOMAIN_DESTROY, Access::write,
         on_domain(store, "DOMAIN_DESTROY", [&sup](const DomainView& v, Reader&) { return destroy(sup, v, 0); })},
        {Proc::DOMAIN_DESTROY_FLAGS, Access::write,
         flagged(store, "DOMAIN_DESTROY_FLAGS", [&sup](const DomainView& v, uint32_t f) { return destroy(sup, v, f); })},
        {Proc::DOMAIN_SHUTDOWN, Access::write,
         on_domain(store, "DOMAIN_SHUTDOWN", [&sup](const DomainView& v, Reader&) { return shutdown(sup, v, 0); })},
        {Proc::DOMAIN_SHUTDOWN_FLAGS, Access::write,
         flagged(store, "DOMAIN_SHUTDOWN_FLAGS", [&sup](const DomainView& v, uint32_t f) { return shutdown(sup, v, f); })},
        {Proc::DOMAIN_SUSPEND, Access::write,
         on_domain(store, "DOMAIN_SUSPEND", [&sup](const DomainView& v, Reader&) { return pause_or_resume(sup, v, true); })},
        {Proc::DOMAIN_RESUME, Access::write,
         on_domain(store, "DOMAIN_RESUME", [&sup](const DomainView& v, Reader&) { return pause_or_resume(sup, v, false); })},
    };
}

namespace {

std::string first_line(const std::string& path) {
    std::ifstream f(path);
    std::string line;
    std::getline(f, line);
    return line;
}

}  // namespace

void autostart_domains(DomainStore& store, Supervisor& sup, SaveImages& images, const std::string& marker) {
    std::string boot = first_line("/proc/sys/kernel/random/boot_id");
    if (boot.empty()) {
        vmm::log::warn("vmmd: autostart: cannot read /proc/sys/kernel/random/boot_id; no domain is autostarted");
        return;
    }
    if (first_line(marker) == boot) return;  // a restart in the same boot: what runs was adopted, the rest stays
    // Recorded first: a vmmd that dies while it autostarts must not start them again in this boot.
    if (auto s = write_file_atomically(marker, boot + "\n"); !s) {
        vmm::log::warn("vmmd: autostart: {}; no domain is autostarted", s.error().message());
        return;
    }
    for (const DomainView& v : store.list()) {
        if (!v.persistent || !v.autostart || v.active()) continue;
        Reply r = start(store, sup, v.def, false, &images);
        if (r.error) vmm::log::warn("vmmd: domain '{}': autostart failed: {}", v.def.name, r.error->message);
        else vmm::log::info("vmmd: domain '{}' autostarted", v.def.name);
    }
}

}  // namespace vmmd

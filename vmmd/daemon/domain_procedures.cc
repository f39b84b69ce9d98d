#include "vmmd/daemon/domain_procedures.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vmmd/domain/domain_args.h"
#include "vmmd/domain/domain_xml.h"

namespace vmmd {

namespace {

using rpc::Proc;
using rpc::Access;
using rpc::Caller;
using rpc::Reply;
using xdr::Reader;
using xdr::Writer;

// libvirt's procedure numbers (remote_protocol.x).

// DOMAIN_DEFINE_XML, and DOMAIN_DEFINE_XML_FLAGS (`with_flags`): its one flag, VALIDATE, asks for
// the schema's checks, which every definition here gets (an element vmm does not know is refused).
Reply define(DomainStore& store, const DomainStore::UuidSource& random_uuid, const Supervisor::Listener& events, Reader& args,
             const std::string& emulator, bool with_flags = false) {
    const char* proc = with_flags ? "DOMAIN_DEFINE_XML_FLAGS" : "DOMAIN_DEFINE_XML";
    auto xml = args.string(rpc::kMaxString);
    auto flags = with_flags ? args.u32() : vmm::Result<uint32_t>(0u);
    if (!xml || !flags) return undecodable(proc);
    if ((*flags & ~uint32_t{VIR_DOMAIN_DEFINE_VALIDATE}) != 0) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("{}: unsupported flags ({:#x})", proc, *flags & ~uint32_t{VIR_DOMAIN_DEFINE_VALIDATE}));
    }
    auto parsed = client_definition(*xml, random_uuid(), emulator);
    if (auto* refused = std::get_if<Reply>(&parsed)) return std::move(*refused);
    auto* def = std::get_if<DomainDef>(&parsed);
    bool existed = store.by_uuid(def->uuid).has_value();
    auto v = store.define(*def);
    if (!v) return rpc::fail(VIR_ERR_OPERATION_FAILED, v.error().message());
    if (events) {
        events(*def, v->id, {VIR_DOMAIN_EVENT_DEFINED, existed ? VIR_DOMAIN_EVENT_DEFINED_UPDATED : VIR_DOMAIN_EVENT_DEFINED_ADDED});
    }
    return domain_reply(*v);
}

Reply undefine(DomainStore& store, const Supervisor::Listener& events, const ManagedSaves& managed, const DomainView& v,
               std::optional<uint32_t> flags) {
    if (flags && (*flags & ~uint32_t{VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA |
                                      VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA}) != 0) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("DOMAIN_UNDEFINE_FLAGS: flags {:#x} ask for what a vmm domain does "
                                                           "not have (nvram, TPM)", *flags));
    }
    if (managed.undefining) {
        if (auto s = managed.undefining(v.def, flags && (*flags & VIR_DOMAIN_UNDEFINE_MANAGED_SAVE) != 0); !s) {
            return rpc::fail(VIR_ERR_OPERATION_INVALID, "Requested operation is not valid: " + s.error().message());
        }
    }
    if (auto s = store.undefine(v.def.uuid); !s) return rpc::fail(VIR_ERR_OPERATION_INVALID, s.error().message());
    if (events) events(v.def, v.id, {VIR_DOMAIN_EVENT_UNDEFINED, VIR_DOMAIN_EVENT_UNDEFINED_REMOVED});
    return rpc::ok();
}

// Whether `v` passes CONNECT_LIST_ALL_DOMAINS's filter `flags` (each group filters only when
// one of its flags is given).
bool listed(const DomainView& v, uint32_t flags, const ManagedSaves& managed) {
    bool saved = (flags & (VIR_CONNECT_LIST_DOMAINS_MANAGEDSAVE | VIR_CONNECT_LIST_DOMAINS_NO_MANAGEDSAVE)) != 0 &&
                 managed.exists && managed.exists(v.def);
    if ((flags & (VIR_CONNECT_LIST_DOMAINS_MANAGEDSAVE | VIR_CONNECT_LIST_DOMAINS_NO_MANAGEDSAVE)) != 0 &&
        (flags & (saved ? VIR_CONNECT_LIST_DOMAINS_MANAGEDSAVE : VIR_CONNECT_LIST_DOMAINS_NO_MANAGEDSAVE)) == 0) {
        return false;
    }
    auto group = [flags](uint32_t mask, bool pass) { return (flags & mask) == 0 || pass; };
    bool running = v.active() && v.state.state == VIR_DOMAIN_RUNNING, paused = v.active() && v.state.state == VIR_DOMAIN_PAUSED;
    return group(VIR_CONNECT_LIST_DOMAINS_AUTOSTART | VIR_CONNECT_LIST_DOMAINS_NO_AUTOSTART,
                 (flags & (v.autostart ? VIR_CONNECT_LIST_DOMAINS_AUTOSTART : VIR_CONNECT_LIST_DOMAINS_NO_AUTOSTART)) != 0) &&
           group(VIR_CONNECT_LIST_DOMAINS_ACTIVE | VIR_CONNECT_LIST_DOMAINS_INACTIVE,
                 (flags & (v.active() ? VIR_CONNECT_LIST_DOMAINS_ACTIVE : VIR_CONNECT_LIST_DOMAINS_INACTIVE)) != 0) &&
           group(VIR_CONNECT_LIST_DOMAINS_PERSISTENT | VIR_CONNECT_LIST_DOMAINS_TRANSIENT,
                 (flags & (v.persistent ? VIR_CONNECT_LIST_DOMAINS_PERSISTENT : VIR_CONNECT_LIST_DOMAINS_TRANSIENT)) != 0) &&
           group(VIR_CONNECT_LIST_DOMAINS_RUNNING | VIR_CONNECT_LIST_DOMAINS_PAUSED | VIR_CONNECT_LIST_DOMAINS_SHUTOFF |
                     VIR_CONNECT_LIST_DOMAINS_OTHER,
                 ((flags & VIR_CONNECT_LIST_DOMAINS_RUNNING) != 0 && running) ||
                     ((flags & VIR_CONNECT_LIST_DOMAINS_PAUSED) != 0 && paused) ||
                     ((flags & VIR_CONNECT_LIST_DOMAINS_SHUTOFF) != 0 && !v.active()) ||
                     ((flags & VIR_CONNECT_LIST_DOMAINS_OTHER) != 0 && v.active() && !running && !paused));
}

Reply list_all(DomainStore& store, const ManagedSaves& managed, Reader& args) {
    auto need = args.i32();
    auto flags = args.u32();
    if (!need || !flags) return undecodable("CONNECT_LIST_ALL_DOMAINS");
    std::vector<DomainView> picked;
    for (const DomainView& v : store.list())
        if (listed(v, *flags, managed)) picked.push_back(v);
    Writer w;
    w.u32(*need != 0 ? static_cast<uint32_t>(picked.size()) : 0);
    if (*need != 0)
        for (const DomainView& v : picked) put_domain(w, v);
    w.u32(static_cast<uint32_t>(picked.size()));
    return rpc::ok(std::move(w));
}

Reply get_info(const DomainView& v, const ManagedSaves& runtime) {
    Writer w;
    w.u32(static_cast<uint32_t>(v.state.state));  // unsigned char: one XDR unit
    w.u64(v.def.memory_kib);                       // maxMem
    w.u64(v.active() ? v.def.memory_kib : 0);      // memory
    w.u32(v.def.vcpus);                            // unsigned short: one XDR unit
    // cpuTime: the vmm's own (its vCPUs' and its migrations'), as libvirt's QEMU driver reports its process's.
    w.u64(v.active() && runtime.cpu_time_ns ? runtime.cpu_time_ns(v.def.uuid) : 0);
    return rpc::ok(std::move(w));
}

Reply set_autostart(DomainStore& store, const DomainView& v, Reader& a) {
    auto on = a.i32();
    if (!on) return undecodable("DOMAIN_SET_AUTOSTART");
    if (!v.persistent) {
        return rpc::fail(VIR_ERR_OPERATION_INVALID,
                         fmt::format("Requested operation is not valid: cannot set autostart for transient domain '{}'", v.def.name));
    }
    if (auto s = store.set_autostart(v.def.uuid, *on != 0); !s) return rpc::fail(VIR_ERR_OPERATION_FAILED, s.error().message());
    return rpc::ok();
}

Reply get_state(const DomainView& v) {
    Writer w;
    w.i32(v.state.state);
    w.i32(v.state.reason);
    return rpc::ok(std::move(w));
}

// The older list calls (virsh falls back to them on old daemons; Python's listDomainsID).
Reply count(DomainStore& store, bool active) {
    int32_t n = 0;
    for (const DomainView& v : store.list()) n += v.active() == active ? 1 : 0;
    return rpc::ok_i32(n);
}

Reply list_ids(DomainStore& store, Reader& args) {
    auto max = args.i32();
    if (!max || *max < 0 || static_cast<size_t>(*max) > kDomainListMax) return undecodable("CONNECT_LIST_DOMAINS");
    Writer w;
    std::vector<int32_t> ids;
    for (const DomainView& v : store.list())
        if (v.active() && ids.size() < static_cast<size_t>(*max)) ids.push_back(v.id);
    w.u32(static_cast<uint32_t>(ids.size()));
    for (int32_t id : ids) w.i32(id);
    return rpc::ok(std::move(w));
}

Reply list_defined(DomainStore& store, Reader& args) {
    auto max = args.i32();
    if (!max || *max < 0 || static_cast<size_t>(*max) > kDomainListMax) return undecodable("CONNECT_LIST_DEFINED_DOMAINS");
    std::vector<std::string> names;
    for (const DomainView& v : store.list())
        if (!v.active() && names.size() < static_cast<size_t>(*max)) names.push_back(v.def.name);
    Writer w;
    w.u32(static_cast<uint32_t>(names.size()));
    for (const std::string& n : names) w.string(n);
    return rpc::ok(std::move(w));
}

Reply lookup(std::optional<DomainView> v, const std::string& what) { return v ? domain_reply(*v) : no_domain(what); }

std::vector<rpc::Procedure> lookups(DomainStore& store) {
    return {
        {Proc::DOMAIN_LOOKUP_BY_NAME, Access::read_only, [&store](Caller&, Reader& a) {
             auto name = a.string(rpc::kMaxString);
             if (!name) return undecodable("DOMAIN_LOOKUP_BY_NAME");
             return lookup(store.by_name(*name), fmt::format("no domain with matching name '{}'", *name));
         }},
        {Proc::DOMAIN_LOOKUP_BY_UUID, Access::read_only, [&store](Caller&, Reader& a) {
             Uuid u{};
             if (!a.fixed_opaque(u)) return undecodable("DOMAIN_LOOKUP_BY_UUID");
             return lookup(store.by_uuid(u), fmt::format("no domain with matching uuid '{}'", format_uuid(u)));
         }},
        {Proc::DOMAIN_LOOKUP_BY_ID, Access::read_only, [&store](Caller&, Reader& a) {
             auto id = a.i32();
             if (!id) return undecodable("DOMAIN_LOOKUP_BY_ID");
             return lookup(store.by_id(*id), fmt::format("no domain with matching id {}", *id));
         }},
    };
}

}  // namespace

std::vector<rpc::Procedure> domain_procedures(DomainStore& store, DomainStore::UuidSource random_uuid,
                                              Supervisor::Listener events, ManagedSaves managed, std::string emulator) {
    auto is_active = [](const DomainView& v, Reader&) { return rpc::ok_i32(v.active() ? 1 : 0); };
    std::vector<rpc::Procedure> t = {
        {Proc::DOMAIN_DEFINE_XML, Access::write,
         [&store, random_uuid, events, emulator](Caller&, Reader& a) { return define(store, random_uuid, events, a, emulator); }},
        {Proc::DOMAIN_DEFINE_XML_FLAGS, Access::write,
         [&store, random_uuid, events, emulator](Caller&, Reader& a) { return define(store, random_uuid, events, a, emulator, true); }},
        {Proc::DOMAIN_UNDEFINE, Access::write,
         on_domain(store, "DOMAIN_UNDEFINE", [&store, events, managed](const DomainView& v, Reader&) {
             return undefine(store, events, managed, v, std::nullopt);
         })},
        {Proc::DOMAIN_UNDEFINE_FLAGS, Access::write,
         flagged(store, "DOMAIN_UNDEFINE_FLAGS", [&store, events, managed](const DomainView& v, uint32_t f) {
             return undefine(store, events, managed, v, f);
         })},
        {Proc::CONNECT_LIST_ALL_DOMAINS, Access::read_only, [&store, managed](Caller&, Reader& a) { return list_all(store, managed, a); }},
        {Proc::CONNECT_NUM_OF_DOMAINS, Access::read_only, [&store](Caller&, Reader&) { return count(store, true); }},
        {Proc::CONNECT_NUM_OF_DEFINED_DOMAINS, Access::read_only,
         [&store](Caller&, Reader&) { return count(store, false); }},
        {Proc::CONNECT_LIST_DOMAINS, Access::read_only, [&store](Caller&, Reader& a) { return list_ids(store, a); }},
        {Proc::CONNECT_LIST_DEFINED_DOMAINS, Access::read_only,
         [&store](Caller&, Reader& a) { return list_defined(store, a); }},
        {Proc::DOMAIN_GET_XML_DESC, Access::read_only,
         flagged(store, "DOMAIN_GET_XML_DESC", [&store](const DomainView& v, uint32_t flags) {
             Writer w;
             bool live = v.active() && (flags & VIR_DOMAIN_XML_INACTIVE) == 0;
             // dumpxml --inactive: the definition the next start uses (no id).
             auto config = live ? std::nullopt : store.config_of(v.def.uuid);
             w.string(format_domain_xml(config ? *config : v.def, live ? std::optional(v.id) : std::nullopt));
             return rpc::ok(std::move(w));
         })},
        {Proc::DOMAIN_GET_INFO, Access::read_only,
         on_domain(store, "DOMAIN_GET_INFO", [managed](const DomainView& v, Reader&) { return get_info(v, managed); })},
        {Proc::DOMAIN_GET_STATE, Access::read_only,
         flagged(store, "DOMAIN_GET_STATE", [](const DomainView& v, uint32_t) { return get_state(v); })},
        {Proc::DOMAIN_IS_ACTIVE, Access::read_only, on_domain(store, "DOMAIN_IS_ACTIVE", is_active)},
        {Proc::DOMAIN_IS_PERSISTENT, Access::read_only,
         on_domain(store, "DOMAIN_IS_PERSISTENT", [](const DomainView& v, Reader&) { return rpc::ok_i32(v.persistent ? 1 : 0); })},
        {Proc::DOMAIN_GET_AUTOSTART, Access::read_only,
         on_domain(store, "DOMAIN_GET_AUTOSTART", [](const DomainView& v, Reader&) { return rpc::ok_i32(v.autostart ? 1 : 0); })},
        {Proc::DOMAIN_SET_AUTOSTART, Access::write,
         on_domain(store, "DOMAIN_SET_AUTOSTART", [&store](const DomainView& v, Reader& a) { return set_autostart(store, v, a); })},
        {Proc::DOMAIN_GET_OS_TYPE, Access::read_only, on_domain(store, "DOMAIN_GET_OS_TYPE", [](const DomainView&, Reader&) { return rpc::ok_string("hvm"); })},
    };
    for (rpc::Procedure& p : lookups(store)) t.push_back(std::move(p));
    return t;
}

}  // namespace vmmd

#include "vmmd/daemon/config_procedures.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vmmd/domain/domain_args.h"
#include "vmmd/domain/domain_xml.h"
#include "vmmd/domain/metadata_xml.h"

namespace vmmd {

namespace {

using rpc::Access;
using rpc::Proc;
using rpc::Reply;
using vmm::Error;
using vmm::Status;
using xdr::Reader;
using xdr::Writer;

// Where a change goes: libvirt's AFFECT_LIVE / AFFECT_CONFIG, or the current state when neither.
struct Affect {
    bool live = false, config = false;
};

Affect affect(const DomainView& v, uint32_t flags) {
    bool live = (flags & VIR_DOMAIN_AFFECT_LIVE) != 0, config = (flags & VIR_DOMAIN_AFFECT_CONFIG) != 0;
    if (!live && !config) return v.active() ? Affect{true, false} : Affect{false, true};
    return Affect{live, config};
}

Reply refused(const DomainView& v, const Affect& a, const Error& e) {
    if (a.live && !v.active()) return not_running(v);
    return rpc::fail(a.config && !v.persistent ? VIR_ERR_OPERATION_INVALID : VIR_ERR_OPERATION_FAILED, e.message());
}

Reply no_metadata() {
    return rpc::fail(VIR_ERR_NO_DOMAIN_METADATA, "metadata not found: Requested metadata element is not present");
}

Reply get_metadata(const DomainStore& store, const DomainView& v, Reader& a) {
    auto type = a.i32();
    auto uri = a.optional_string(rpc::kMaxString);
    auto flags = a.u32();
    if (!type || !uri || !flags) return undecodable("DOMAIN_GET_METADATA");
    if ((*flags & VIR_DOMAIN_AFFECT_LIVE) && (*flags & VIR_DOMAIN_AFFECT_CONFIG)) {
        return rpc::fail(VIR_ERR_INVALID_ARG, "live and config are mutually exclusive");
    }
    if ((*flags & VIR_DOMAIN_AFFECT_LIVE) && !v.active()) return not_running(v);
    std::optional<DomainDef> def = v.def;
    if (*flags & VIR_DOMAIN_AFFECT_CONFIG) def = store.config_of(v.def.uuid);
    if (!def) return rpc::fail(VIR_ERR_OPERATION_INVALID, fmt::format("domain '{}' is transient: it has no persistent definition", v.def.name));
    std::optional<std::string> text;
    switch (*type) {
        case VIR_DOMAIN_METADATA_TITLE: text = def->title; break;
        case VIR_DOMAIN_METADATA_DESCRIPTION: text = def->description; break;
        case VIR_DOMAIN_METADATA_ELEMENT:
            if (!*uri || (*uri)->empty()) return rpc::fail(VIR_ERR_INVALID_ARG, "metadata of an element needs its namespace URI");
            for (const ForeignMetadata& m : def->metadata)
                if (m.uri == **uri) text = m.xml;
            break;
        default: return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("metadata type {}: 0 (description), 1 (title) or 2 (element)", *type));
    }
    if (!text) return no_metadata();
    return rpc::ok_string(*text);
}

// The change virsh desc or metadata asks for, checked before any definition is touched.
vmm::Result<std::function<Status(DomainDef&)>> metadata_change(int32_t type, const std::optional<std::string>& text,
                                                                const std::optional<std::string>& key,
                                                                const std::optional<std::string>& uri) {
    std::optional<std::string> value = text && !text->empty() ? text : std::nullopt;  // empty or absent: removed
    if (type == VIR_DOMAIN_METADATA_TITLE) {
        if (value && value->find('\n') != std::string::npos) return Error("a title cannot hold a newline");
        return std::function<Status(DomainDef&)>([value](DomainDef& d) -> Status { d.title = value; return {}; });
    }
    if (type == VIR_DOMAIN_METADATA_DESCRIPTION) {
        return std::function<Status(DomainDef&)>([value](DomainDef& d) -> Status { d.description = value; return {}; });
    }
    if (type != VIR_DOMAIN_METADATA_ELEMENT) return Error(fmt::format("metadata type {}: 0 (description), 1 (title) or 2 (element)", type));
    if (!uri || uri->empty()) return Error("metadata of an element needs its namespace URI");
    if (*uri == kVmmNamespace) return Error("vmm's own metadata changes with the definition (virsh edit or define), not here");
    std::optional<ForeignMetadata> element;
    if (value) {
        auto e = metadata_element(*value, key.value_or(""), *uri);
        if (!e) return e.error();
        element = std::move(*e);
    }
    return std::function<Status(DomainDef&)>(
        [u = *uri, element](DomainDef& d) -> Status { return set_foreign_metadata(d, u, element); });
}

Reply set_metadata(DomainStore& store, const DomainView& v, Reader& a) {
    auto type = a.i32();
    auto text = a.optional_string(rpc::kMaxString);
    auto key = a.optional_string(rpc::kMaxString);
    auto uri = a.optional_string(rpc::kMaxString);
    auto flags = a.u32();
    if (!type || !text || !key || !uri || !flags) return undecodable("DOMAIN_SET_METADATA");
    auto where = affect(v, *flags);
    auto change = metadata_change(*type, *text, *key, *uri);
    if (!change) return rpc::fail(VIR_ERR_INVALID_ARG, change.error().message());
    if (auto s = store.edit(v.def.uuid, where.live, where.config, *change); !s) return refused(v, where, s.error());
    return rpc::ok();
}

// setmem and setmaxmem. A vmm guest has no balloon: its memory is all its maximum while it runs,
// and a definition's current memory equals its maximum. So the running figure cannot change,
// setmem --config can only say what is (current = maximum), and setmaxmem --config sets both.
Reply set_memory(DomainStore& store, const DomainView& v, uint64_t kib, uint32_t flags) {
    uint32_t known = uint32_t{VIR_DOMAIN_AFFECT_LIVE} | uint32_t{VIR_DOMAIN_AFFECT_CONFIG} | uint32_t{VIR_DOMAIN_MEM_MAXIMUM};
    if ((flags & ~known) != 0) return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("setmem: unknown flags {:#x}", flags & ~known));
    auto where = affect(v, flags);
    bool maximum = (flags & VIR_DOMAIN_MEM_MAXIMUM) != 0;
    if (where.live && !v.active()) return not_running(v);
    if (where.live && kib != v.def.memory_kib) {
        return rpc::fail(VIR_ERR_OPERATION_UNSUPPORTED,
                         fmt::format("a running vmm guest's memory is fixed at {} KiB (there is no balloon): {} --config "
                                     "changes what its next start gets", v.def.memory_kib, maximum ? "setmaxmem" : "setmem"));
    }
    if (!where.config) return rpc::ok();
    auto change = [kib, maximum](DomainDef& d) -> Status {
        if (!maximum && kib != d.memory_kib) {
            return Error(fmt::format("current memory {} KiB differs from the maximum {} KiB: vmm has no balloon, so they are "
                                     "equal; setmaxmem --config changes both", kib, d.memory_kib));
        }
        DomainDef next = d;
        next.memory_kib = kib;
        auto checked = parse_domain_xml(format_domain_xml(next), next.uuid);  // every rule a definition obeys
        if (!checked) return checked.error();
        d = *checked;
        return {};
    };
    if (auto s = store.edit(v.def.uuid, false, true, change); !s) return refused(v, {false, true}, s.error());
    return rpc::ok();
}

template <int32_t kFixedFlags>
Reply set_memory_legacy(DomainStore& store, const DomainView& v, Reader& a, const char* proc) {
    auto kib = a.u64();
    if (!kib) return undecodable(proc);
    return set_memory(store, v, *kib, kFixedFlags);
}

}  // namespace

std::vector<rpc::Procedure> config_procedures(DomainStore& store) {
    return {
        {Proc::DOMAIN_GET_METADATA, Access::read_only,
         on_domain(store, "DOMAIN_GET_METADATA", [&store](const DomainView& v, Reader& a) { return get_metadata(store, v, a); })},
        {Proc::DOMAIN_SET_METADATA, Access::write,
         on_domain(store, "DOMAIN_SET_METADATA", [&store](const DomainView& v, Reader& a) { return set_metadata(store, v, a); })},
        {Proc::DOMAIN_SET_MEMORY_FLAGS, Access::write, on_domain(store, "DOMAIN_SET_MEMORY_FLAGS", [&store](const DomainView& v, Reader& a) {
             auto kib = a.u64();
             auto flags = a.u32();
             if (!kib || !flags) return undecodable("DOMAIN_SET_MEMORY_FLAGS");
             return set_memory(store, v, *kib, *flags);
         })},
        // The older calls, as libvirt maps them: setmem on the running domain, setmaxmem on the current one.
        {Proc::DOMAIN_SET_MEMORY, Access::write, on_domain(store, "DOMAIN_SET_MEMORY", [&store](const DomainView& v, Reader& a) {
             return set_memory_legacy<VIR_DOMAIN_AFFECT_LIVE>(store, v, a, "DOMAIN_SET_MEMORY");
         })},
        {Proc::DOMAIN_SET_MAX_MEMORY, Access::write, on_domain(store, "DOMAIN_SET_MAX_MEMORY", [&store](const DomainView& v, Reader& a) {
             return set_memory_legacy<VIR_DOMAIN_MEM_MAXIMUM>(store, v, a, "DOMAIN_SET_MAX_MEMORY");
         })},
    };
}

}  // namespace vmmd

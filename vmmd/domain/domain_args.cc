#include "vmmd/domain/domain_args.h"

#include <fmt/format.h>
#include <libvirt/virterror.h>

#include <filesystem>

#include "vmmd/domain/domain_xml.h"

namespace vmmd {

void put_domain(xdr::Writer& w, const DomainView& v) {
    w.string(v.def.name);
    w.fixed_opaque(v.def.uuid);
    w.i32(v.id);
}

rpc::Reply domain_reply(const DomainView& v) {
    xdr::Writer w;
    put_domain(w, v);
    return rpc::ok(std::move(w));
}

rpc::Reply undecodable(const char* proc) {
    return rpc::fail(VIR_ERR_RPC, fmt::format("{}: arguments that do not decode", proc));
}

rpc::Reply no_domain(const std::string& what) { return rpc::fail(VIR_ERR_NO_DOMAIN, "Domain not found: " + what); }

rpc::Reply not_running(const DomainView& v) {
    return rpc::fail(VIR_ERR_OPERATION_INVALID, fmt::format("Requested operation is not valid: domain '{}' is not running", v.def.name));
}

std::variant<DomainDef, rpc::Reply> client_definition(const std::string& xml, const Uuid& random_uuid, const std::string& emulator) {
    auto def = parse_domain_xml(xml, random_uuid);
    if (!def) return rpc::fail(VIR_ERR_XML_ERROR, def.error().message());
    if (def->emulator && !emulator.empty()) {
        std::error_code a, b;
        if (!std::filesystem::equivalent(*def->emulator, emulator, a) || a || b) {
            return rpc::fail(VIR_ERR_CONFIG_UNSUPPORTED, fmt::format("<emulator>{}</emulator>: this vmmd runs {} (its --vmm); "
                                                                     "name that one or leave <emulator> out",
                                                                     *def->emulator, emulator));
        }
    }
    return std::move(*def);
}

std::optional<DomainView> take_domain(const DomainStore& store, xdr::Reader& args, std::string& missing) {
    auto name = args.string(rpc::kMaxString);
    Uuid uuid{};
    auto got_uuid = args.fixed_opaque(uuid);
    auto id = args.i32();
    if (!name || !got_uuid || !id) {
        missing = "";
        return std::nullopt;
    }
    auto v = store.by_uuid(uuid);
    if (!v) missing = fmt::format("no domain with matching uuid '{}' ({})", format_uuid(uuid), *name);
    return v;
}

}  // namespace vmmd

// What every procedure on a domain shares: the remote_nonnull_domain argument (decoded, then
// found by its UUID as libvirt's daemon does), the domain in a reply, and the usual refusals.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "vmmd/domain/domain_store.h"
#include "vmmd/rpc/dispatch.h"

namespace vmmd {

void put_domain(xdr::Writer& w, const DomainView& v);
rpc::Reply domain_reply(const DomainView& v);
rpc::Reply undecodable(const char* proc);

// The most domains one list reply names (REMOTE_DOMAIN_LIST_MAX in libvirt's remote_protocol.x).
inline constexpr size_t kDomainListMax = 16384;
rpc::Reply no_domain(const std::string& what);
// VIR_ERR_OPERATION_INVALID for a call that needs the domain running.
rpc::Reply not_running(const DomainView& v);

// A definition a client gives (define, create): parsed, and an <emulator> that is not this
// vmmd's vmm (`emulator`) refused (VIR_ERR_CONFIG_UNSUPPORTED); `random_uuid` when it has none.
std::variant<DomainDef, rpc::Reply> client_definition(const std::string& xml, const Uuid& random_uuid, const std::string& emulator);

// Reads a remote_nonnull_domain: the domain, or nullopt with `missing` saying which domain was
// asked for ("" when the argument did not decode).
std::optional<DomainView> take_domain(const DomainStore& store, xdr::Reader& args, std::string& missing);

// A procedure on one domain: `f(view, args)` once the domain argument is decoded and found.
template <typename F>
rpc::Handler on_domain(const DomainStore& store, const char* proc, F f) {
    return [&store, proc, f](rpc::Caller&, xdr::Reader& args) -> rpc::Reply {
        std::string missing;
        auto v = take_domain(store, args, missing);
        if (!v) return missing.empty() ? undecodable(proc) : no_domain(missing);
        return f(*v, args);
    };
}

// The same for a procedure whose arguments end with unsigned flags: `f(view, flags)`.
template <typename F>
rpc::Handler flagged(const DomainStore& store, const char* proc, F f) {
    return on_domain(store, proc, [proc, f](const DomainView& v, xdr::Reader& a) {
        auto flags = a.u32();
        if (!flags) return undecodable(proc);
        return f(v, *flags);
    });
}

}  // namespace vmmd

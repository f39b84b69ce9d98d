#include "vmmd/peer/peer_migration.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <memory>
#include <mutex>
#include <type_traits>

#include "vmmd/peer/libvirt_handles.h"

namespace vmmd::peer {

using vmm::Error;

namespace {

// The migration's typed parameters, as libvirt's client library takes them.
vmm::Result<std::unique_ptr<TypedParams>> to_libvirt(const std::vector<rpc::TypedParam>& params) {
    auto out = std::make_unique<TypedParams>();
    for (const rpc::TypedParam& p : params) {
        const char* name = p.name.c_str();
        auto* l = &out->list;
        int *n = &out->count, *m = &out->max;
        int rc = std::visit(
            [&](const auto& v) {
                using T = std::decay_t<decltype(v)>;
                if constexpr (std::is_same_v<T, int32_t>) return virTypedParamsAddInt(l, n, m, name, v);
                if constexpr (std::is_same_v<T, uint32_t>) return virTypedParamsAddUInt(l, n, m, name, v);
                if constexpr (std::is_same_v<T, int64_t>) return virTypedParamsAddLLong(l, n, m, name, v);
                if constexpr (std::is_same_v<T, uint64_t>) return virTypedParamsAddULLong(l, n, m, name, v);
                if constexpr (std::is_same_v<T, double>) return virTypedParamsAddDouble(l, n, m, name, v);
                if constexpr (std::is_same_v<T, bool>) return virTypedParamsAddBoolean(l, n, m, name, v ? 1 : 0);
                if constexpr (std::is_same_v<T, std::string>) return virTypedParamsAddString(l, n, m, name, v.c_str());
            },
            p.value);
        if (rc < 0) return Error(fmt::format("migration parameter '{}': {}", p.name, virGetLastErrorMessage()));
    }
    return out;
}

// libvirt's client library, once per process: initialised before any thread uses it, and with
// its default error handler (a line on stderr for every error) silenced: vmmd reports the errors.
void init_library() {
    static std::once_flag once;
    std::call_once(once, [] {
        virInitialize();
        virSetErrorFunc(nullptr, [](void*, virErrorPtr) {});
    });
}

Error failed(std::string_view what) { return Error(fmt::format("{}: {}", what, virGetLastErrorMessage())); }

bool uri_safe(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

}  // namespace

vmm::Status migrate(const PeerMigration& m) {
    init_library();
    auto params = to_libvirt(m.params);
    if (!params) return params.error();
    Connection self(virConnectOpen(m.self_uri.c_str()));
    if (!self) return failed("connect to this vmmd at " + m.self_uri);
    Connection dest(virConnectOpen(m.dest_uri.c_str()));
    if (!dest) return failed("connect to the destination at " + m.dest_uri);
    Domain domain(virDomainLookupByUUIDString(self.get(), m.uuid.c_str()));
    if (!domain) return failed("find the domain " + m.uuid);
    Domain arrived(virDomainMigrate3(domain.get(), dest.get(), (*params)->list, static_cast<unsigned>((*params)->count),
                                     m.flags & ~static_cast<uint32_t>(VIR_MIGRATE_PEER2PEER)));
    if (!arrived) return failed("migrate to " + m.dest_uri);
    return {};
}

std::string self_uri(const std::string& default_uri, const std::string& socket) {
    auto scheme_end = default_uri.find(":///");
    std::string path = scheme_end == std::string::npos ? "/system" : default_uri.substr(scheme_end + 3);
    std::string uri = "vmm+unix://" + path + "?socket=";
    for (char c : socket) uri += uri_safe(c) ? std::string(1, c) : fmt::format("%{:02X}", static_cast<unsigned char>(c));
    return uri;
}

}  // namespace vmmd::peer

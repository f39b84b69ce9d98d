#include "vmmd/peer/peer_migration.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <memory>
#include <mutex>
#include <type_traits>

namespace vmmd::peer {

using vmm::Error;

namespace {

struct CloseConnection {
    void operator()(virConnectPtr c) const { virConnectClose(c); }
};
struct FreeDomain {
    void operator()(virDomainPtr d) const { virDomainFree(d); }
};
using Connection = std::unique_ptr<virConnect, CloseConnection>;
using Domain = std::unique_ptr<virDomain, FreeDomain>;

// libvirt's typed-parameter list, grown by virTypedParamsAdd* and freed with the object.
class Params {
public:
    Params() = default;
    Params(const Params&) = delete;
    Params& operator=(const Params&) = delete;
    ~Params() { virTypedParamsFree(list_, count_); }

    vmm::Status add(const rpc::TypedParam& p) {
        const char* name = p.name.c_str();
        int rc = std::visit(
            [&](const auto& v) {
                using T = std::decay_t<decltype(v)>;
                if constexpr (std::is_same_v<T, int32_t>) return virTypedParamsAddInt(&list_, &count_, &max_, name, v);
                if constexpr (std::is_same_v<T, uint32_t>) return virTypedParamsAddUInt(&list_, &count_, &max_, name, v);
                if constexpr (std::is_same_v<T, int64_t>) return virTypedParamsAddLLong(&list_, &count_, &max_, name, v);
                if constexpr (std::is_same_v<T, uint64_t>) return virTypedParamsAddULLong(&list_, &count_, &max_, name, v);
                if constexpr (std::is_same_v<T, double>) return virTypedParamsAddDouble(&list_, &count_, &max_, name, v);
                if constexpr (std::is_same_v<T, bool>) return virTypedParamsAddBoolean(&list_, &count_, &max_, name, v ? 1 : 0);
                if constexpr (std::is_same_v<T, std::string>) return virTypedParamsAddString(&list_, &count_, &max_, name, v.c_str());
            },
            p.value);
        if (rc < 0) return Error(fmt::format("migration parameter '{}': {}", p.name, virGetLastErrorMessage()));
        return {};
    }
    virTypedParameterPtr list() const { return list_; }
    int count() const { return count_; }

private:
    virTypedParameterPtr list_ = nullptr;
    int count_ = 0;
    int max_ = 0;
};

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
    Params params;
    for (const rpc::TypedParam& p : m.params)
        if (auto s = params.add(p); !s) return s;
    Connection self(virConnectOpen(m.self_uri.c_str()));
    if (!self) return failed("connect to this vmmd at " + m.self_uri);
    Connection dest(virConnectOpen(m.dest_uri.c_str()));
    if (!dest) return failed("connect to the destination at " + m.dest_uri);
    Domain domain(virDomainLookupByUUIDString(self.get(), m.uuid.c_str()));
    if (!domain) return failed("find the domain " + m.uuid);
    Domain arrived(virDomainMigrate3(domain.get(), dest.get(), params.list(), static_cast<unsigned>(params.count()),
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

#include "vmmd/migration/incoming_addresses.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <netdb.h>
#include <sys/socket.h>

#include <memory>

#include "vmm/common/fd.h"

namespace vmmd {

using vmm::Error;

namespace {

using AddrInfo = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;

// Whether `host`:`port` can be bound now (the vmm binds it a moment later).
bool can_bind(const std::string& host, uint16_t port) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
    AddrInfo hold(found, &::freeaddrinfo);
    vmm::UniqueFd s(::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    return s.valid() && ::bind(s.get(), found->ai_addr, found->ai_addrlen) == 0;
}

// The numeric address `name` resolves to first.
vmm::Result<std::string> numeric_address(const std::string& name) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (int e = ::getaddrinfo(name.c_str(), nullptr, &hints, &found); e != 0) {
        return Error(fmt::format("'{}' does not resolve ({}): start vmmd with --migration-address ADDR, or give the "
                                 "migration a URI (--migrateuri tcp://ADDR:PORT)",
                                 name, ::gai_strerror(e)));
    }
    AddrInfo hold(found, &::freeaddrinfo);
    char text[NI_MAXHOST];
    if (::getnameinfo(found->ai_addr, found->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST) != 0) {
        return Error(fmt::format("'{}' resolves to an address vmmd cannot write", name));
    }
    return std::string(text);
}

}  // namespace

vmm::Result<IncomingAddresses::Incoming> IncomingAddresses::choose(const Uuid& uuid, const std::optional<std::string>& given) {
    MigrationUri u{"tcp", "", 0, {}};
    if (given) {
        auto parsed = parse_migration_uri(*given);
        if (!parsed) return parsed.error();
        u = *parsed;
    }
    // The source is told the host given, else the migration address, else the host's name (as
    // libvirt's QEMU driver tells it); every address (0.0.0.0, ::) is listened on only when asked.
    MigrationUri told = u;
    if (u.host.empty()) {
        auto host = migration_address_.empty() ? numeric_address(hostname_) : vmm::Result<std::string>(migration_address_);
        if (!host) return host.error();
        u.host = *host;
        told.host = migration_address_.empty() ? hostname_ : migration_address_;
    }
    if (told.host == "0.0.0.0" || told.host == "::") told.host = hostname_;
    if (u.port == 0) {
        auto p = reserve(uuid, u.host);
        if (!p) return p.error();
        u.port = told.port = *p;
    }
    return Incoming{u, told};
}

vmm::Result<uint16_t> IncomingAddresses::reserve(const Uuid& uuid, const std::string& host) {
    auto numeric = numeric_address(host);
    if (!numeric) return numeric.error();
    std::lock_guard lock(mutex_);
    for (uint16_t p = kFirstPort; p <= kLastPort; ++p) {
        bool taken = false;
        for (const auto& [other, port] : ports_) taken = taken || port == p;
        if (taken || !can_bind(*numeric, p)) continue;
        ports_[uuid] = p;
        return p;
    }
    return Error(fmt::format("no free migration port on {} from {} to {} ({} held by migrations here)", host, kFirstPort,
                             kLastPort, ports_.size()));
}

void IncomingAddresses::release(const Uuid& uuid) {
    std::lock_guard lock(mutex_);
    ports_.erase(uuid);
}

vmm::Result<IncomingAddresses::Incoming> IncomingAddresses::choose(const Uuid& uuid,
                                                                 const std::vector<rpc::TypedParam>& params) {
    auto given = rpc::string_param(params, VIR_MIGRATE_PARAM_URI);
    if (!given) return given.error();
    return choose(uuid, *given);
}

}  // namespace vmmd

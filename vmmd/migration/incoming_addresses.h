// Where incoming migrations listen, and what their sources are told: the host the migration URI
// names, else --migration-address, else the address the host's name resolves to (never every
// address unless the URI asks for it); the port the URI names, else one of libvirt's 49152–49215
// reserved for the domain until its Finish, so that Prepares at once never get one port (a
// probe alone let two pick the same). Thread-safe: Prepares run side by side.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "vmm/common/result.h"
#include "vmmd/domain/domain_def.h"
#include "vmmd/migration/migration_uri.h"
#include "vmmd/rpc/typed_params.h"

namespace vmmd {

class IncomingAddresses {
public:
    static constexpr uint16_t kFirstPort = 49152, kLastPort = 49215;  // libvirt's migration_port_min/max

    explicit IncomingAddresses(std::string hostname) : hostname_(std::move(hostname)) {}
    void use_migration_address(std::string address) { migration_address_ = std::move(address); }

    struct Incoming {
        MigrationUri listen;  // where the vmm listens
        MigrationUri told;    // what the source is told to connect to
    };
    // For an incoming migration of `uuid` asked with `given` (the client's migrate_uri, if any).
    // A port chosen here stays reserved for `uuid` until release().
    vmm::Result<Incoming> choose(const Uuid& uuid, const std::optional<std::string>& given);
    // The same from a step's typed parameters (VIR_MIGRATE_PARAM_URI, the client's migrate_uri).
    vmm::Result<Incoming> choose(const Uuid& uuid, const std::vector<rpc::TypedParam>& params);
    void release(const Uuid& uuid);

private:
    vmm::Result<uint16_t> reserve(const Uuid& uuid, const std::string& host);

    std::string hostname_;
    std::string migration_address_;
    std::mutex mutex_;
    std::map<Uuid, uint16_t> ports_;
};

}  // namespace vmmd

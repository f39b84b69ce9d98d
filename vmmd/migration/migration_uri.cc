#include "vmmd/migration/migration_uri.h"

#include <fmt/format.h>

#include <charconv>

namespace vmmd {

using vmm::Error;

vmm::Result<HostPort> parse_host_port(const std::string& text, const std::string& what) {
    HostPort hp;
    std::string rest = text, port;
    if (!rest.empty() && rest[0] == '[') {
        size_t close = rest.find(']');
        if (close == std::string::npos) return Error(fmt::format("{}: '[' without ']'", what));
        hp.host = rest.substr(1, close - 1);
        rest.erase(0, close + 1);
        if (!rest.empty() && rest[0] != ':') return Error(fmt::format("{}: text after the host", what));
        if (!rest.empty()) port = rest.substr(1);
    } else {
        size_t c = rest.rfind(':');
        hp.host = rest.substr(0, c);
        if (c != std::string::npos) port = rest.substr(c + 1);
    }
    if (hp.host.empty()) return Error(fmt::format("{} names no host", what));
    if (hp.host.find_first_of(" /@?#[]") != std::string::npos) return Error(fmt::format("{}: '{}' is not a host", what, hp.host));
    if (!port.empty()) {
        unsigned value = 0;
        auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
        if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
            return Error(fmt::format("{}: '{}' is not a port (1 to 65535)", what, port));
        }
        hp.port = static_cast<uint16_t>(value);
    }
    return hp;
}

vmm::Result<MigrationUri> parse_migration_uri(const std::string& text) {
    MigrationUri u;
    size_t colon = text.find(':');
    if (colon == std::string::npos) return Error(fmt::format("migration URI '{}' has no scheme: use tcp://HOST:PORT or rdma://HOST:PORT", text));
    u.scheme = text.substr(0, colon);
    if (u.scheme != "tcp" && u.scheme != "rdma") {
        return Error(fmt::format("migration URI '{}': the vmm driver migrates over tcp:// or rdma://, not {}://", text, u.scheme));
    }
    std::string rest = text.substr(colon + 1);
    if (rest.rfind("//", 0) == 0) rest.erase(0, 2);
    if (size_t slash = rest.find('/'); slash != std::string::npos) {
        if (rest.find_first_not_of('/', slash) != std::string::npos) {
            return Error(fmt::format("migration URI '{}': a path means nothing to a migration", text));
        }
        rest.erase(slash);
    }
    auto hp = parse_host_port(rest, fmt::format("migration URI '{}'", text));
    if (!hp) return hp.error();
    u.host = hp->host;
    u.port = hp->port;
    return u;
}

namespace {
std::string host_part(const MigrationUri& u) { return u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host; }
}  // namespace

std::string vmm_uri(const MigrationUri& u) { return fmt::format("{}:{}:{}", u.scheme, host_part(u), u.port); }

std::string libvirt_uri(const MigrationUri& u) { return fmt::format("{}://{}:{}", u.scheme, host_part(u), u.port); }

}  // namespace vmmd

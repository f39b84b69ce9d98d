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

namespace {
vmm::Result<MigrationUri> parse_one(const std::string& text) {
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
}  // namespace

namespace {
// %XX escapes decoded (a client may escape the fallback's ':' and '/'); an escape that is not
// two hex digits is kept as it is, and parse_one refuses what it makes.
std::string percent_decoded(const std::string& in) {
    std::string out;
    for (size_t i = 0; i < in.size(); ++i) {
        unsigned value = 0;
        if (in[i] == '%' && i + 2 < in.size() &&
            std::from_chars(in.data() + i + 1, in.data() + i + 3, value, 16).ptr == in.data() + i + 3) {
            out += static_cast<char>(value);
            i += 2;
        } else {
            out += in[i];
        }
    }
    return out;
}
}  // namespace

vmm::Result<MigrationUri> parse_migration_uri(const std::string& text) {
    size_t q = text.find('?');
    auto u = parse_one(text.substr(0, q));
    if (!u || q == std::string::npos) return u;
    constexpr std::string_view kKey = "fallback=";
    std::string query = text.substr(q + 1);
    if (query.rfind(kKey, 0) != 0 || query.find_first_of("&?", kKey.size()) != std::string::npos) {
        return Error(fmt::format("migration URI '{}': its one query is a fallback way, ?fallback=tcp://HOST:PORT", text));
    }
    auto f = parse_one(percent_decoded(query.substr(kKey.size())));
    if (!f) return f.error().context("its fallback");
    if (f->port == 0) return Error(fmt::format("migration URI '{}': the fallback needs its port (tcp://HOST:PORT)", text));
    if (f->scheme == u->scheme && f->host == u->host && f->port == u->port) {
        return Error(fmt::format("migration URI '{}': the fallback is the same way as the first", text));
    }
    u->fallback.push_back(std::move(*f));
    return u;
}

namespace {
std::string host_part(const MigrationUri& u) { return u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host; }
}  // namespace

std::string vmm_uri(const MigrationUri& u) { return fmt::format("{}:{}:{}", u.scheme, host_part(u), u.port); }

std::string vmm_fallback_uri(const MigrationUri& u) { return u.fallback.empty() ? "" : vmm_uri(u.fallback[0]); }

std::string libvirt_uri(const MigrationUri& u) {
    std::string out = fmt::format("{}://{}:{}", u.scheme, host_part(u), u.port);
    for (const auto& f : u.fallback) {
        out += "?fallback=";
        for (char c : libvirt_uri(f)) out += c == '%' ? std::string("%25") : std::string(1, c);  // read back decoded
    }
    return out;
}

}  // namespace vmmd

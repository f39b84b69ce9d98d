#include "vmm/migration/wire/uri.h"

#include <fmt/format.h>

#include "vmm/common/units.h"

namespace vmm::migration {

Status parse_host_port(std::string_view text, Uri& out) {
    std::string_view host, port;
    if (text.starts_with("[")) {
        size_t close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
            return Error(fmt::format("'{}' is not [IPV6]:PORT", text));
        }
        host = text.substr(1, close - 1);
        port = text.substr(close + 2);
    } else {
        size_t colon = text.rfind(':');
        if (colon == std::string_view::npos) return Error(fmt::format("'{}' has no :PORT", text));
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (host.find(':') != std::string_view::npos) {
            return Error(fmt::format("'{}': write IPv6 addresses in brackets, e.g. [::1]:4444", text));
        }
    }
    if (host.empty()) return Error(fmt::format("'{}' has no host", text));
    auto p = parse_uint(port);
    if (!p || *p == 0 || *p > 65535) return Error(fmt::format("'{}': port must be 1 to 65535", text));
    out.host = std::string(host);
    out.port = static_cast<uint16_t>(*p);
    return {};
}

// "PATH[,offset=N]": N in bytes (a size suffix allowed), a multiple of 4096 so that pages stay
// pages in the file and a zero page can be a hole.
static Status parse_file(std::string_view rest, Uri& out) {
    std::string_view path = rest;
    if (size_t comma = rest.rfind(",offset="); comma != std::string_view::npos) {
        path = rest.substr(0, comma);
        auto n = parse_size(rest.substr(comma + 8));
        if (!n) return n.error().context("offset");
        if (*n % 4096 != 0) return Error(fmt::format("offset {} is not a multiple of 4096", *n));
        out.offset = *n;
    }
    if (path.empty()) return Error("no file name: write file:PATH");
    if (path.find('\0') != std::string_view::npos) return Error("the file name holds a NUL byte");
    out.path = std::string(path);
    return {};
}

Result<Uri> parse_uri(std::string_view text) {
    Uri u;
    u.text = std::string(text);
    if (text == "defer") {
        u.scheme = "defer";
        return u;
    }
    size_t colon = text.find(':');
    bool scheme_ok = colon != std::string_view::npos && colon != 0 && std::isalpha(static_cast<unsigned char>(text[0]));
    for (size_t i = 0; scheme_ok && i < colon; ++i) {
        char c = text[i];
        scheme_ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
    }
    if (!scheme_ok) {
        return Error(fmt::format("'{}' is not a migration URI: use tcp:HOST:PORT, unix:PATH, rdma:HOST:PORT or file:PATH", text));
    }
    u.scheme = std::string(text.substr(0, colon));
    std::string_view rest = text.substr(colon + 1);
    if (u.scheme == "unix") {
        if (rest.empty() || rest.size() >= 108) return Error(fmt::format("'{}': unix socket path must be 1 to 107 bytes", text));
        u.path = std::string(rest);
        return u;
    }
    if (u.scheme == "file") {
        if (auto s = parse_file(rest, u); !s) return s.error().context(u.text);
        return u;
    }
    if (u.scheme == "tcp" || u.scheme == "rdma") {
        if (auto s = parse_host_port(rest, u); !s) return s.error().context(u.scheme);
        return u;
    }
    // A plugin's scheme: it gets the rest as typed, and host/port when the rest has that form.
    u.path = std::string(rest);
    Uri hp;
    if (parse_host_port(rest, hp)) {
        u.host = hp.host;
        u.port = hp.port;
    }
    return u;
}

}  // namespace vmm::migration

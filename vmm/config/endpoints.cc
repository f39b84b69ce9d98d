#include <fmt/format.h>

#include "vmm/config/config.h"

namespace vmm::config {

namespace {
// An octal permission mode for a socket: 0600, 660 ...; the owner must be able to use it.
Result<uint32_t> parse_mode(std::string_view text) {
    uint32_t mode = 0;
    bool ok = !text.empty() && text.size() <= 4;
    for (char c : text) {
        ok = ok && c >= '0' && c <= '7';
        mode = mode * 8 + static_cast<uint32_t>(c - '0');
    }
    if (!ok || mode > 0777) return Error(fmt::format("socket mode '{}' is not an octal mode such as 0600 or 0660", text));
    if ((mode & 0600) != 0600) return Error(fmt::format("socket mode {:04o} would lock out its owner: include 0600", mode));
    return mode;
}
}  // namespace

Result<Endpoint> parse_endpoint(std::string_view text, bool allow_stdio) {
    if (text == "none") return Endpoint{};
    if (text == "stdio" && allow_stdio) return Endpoint{Endpoint::Kind::stdio, {}};
    if (text.starts_with("unix:") && text.size() > 5) {
        std::string_view rest = text.substr(5);
        Endpoint e{Endpoint::Kind::unix_socket, {}};
        if (size_t opt = rest.rfind(",mode="); opt != std::string_view::npos) {
            auto mode = parse_mode(rest.substr(opt + 6));
            if (!mode) return mode.error();
            e.mode = *mode;
            rest = rest.substr(0, opt);
        }
        e.path = std::string(rest);
        if (e.path.empty()) return Error(fmt::format("'{}' names no socket path", text));
        if (e.path.size() >= 108) return Error(fmt::format("unix socket path '{}' is longer than 107 bytes", e.path));
        return e;
    }
    return Error(fmt::format("'{}' is not a monitor endpoint: use {}unix:PATH[,mode=0660] or none", text,
                             allow_stdio ? "stdio, " : ""));
}

std::string to_string(const Endpoint& e) {
    switch (e.kind) {
        case Endpoint::Kind::none: return "none";
        case Endpoint::Kind::stdio: return "stdio";
        case Endpoint::Kind::unix_socket: return "unix:" + e.path + (e.mode == 0600 ? "" : fmt::format(",mode={:04o}", e.mode));
    }
    return "?";
}

Result<SerialOutput> parse_serial_output(std::string_view text) {
    if (text == "stdout") return SerialOutput{SerialOutput::Kind::stdout_stream, {}};
    if (text == "none") return SerialOutput{SerialOutput::Kind::none, {}};
    if (text.starts_with("file:") && text.size() > 5) {
        return SerialOutput{SerialOutput::Kind::file, std::string(text.substr(5))};
    }
    return Error(fmt::format("'{}' is not a serial output: use stdout, file:PATH or none", text));
}

Status validate_payload_params(std::string_view params) {
    size_t i = 0;
    while (i < params.size()) {
        while (i < params.size() && params[i] == ' ') ++i;
        if (i == params.size()) break;
        size_t end = params.find(' ', i);
        std::string_view tok = params.substr(i, end == std::string_view::npos ? params.size() - i : end - i);
        size_t eq = tok.find('=');
        if (eq == 0 || eq == std::string_view::npos || eq + 1 == tok.size()) {
            return Error(fmt::format("payload parameter '{}' is not key=value", tok));
        }
        for (char c : tok.substr(0, eq)) {
            if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_')) {
                return Error(fmt::format("payload parameter name '{}' may use only a-z, 0-9 and _", tok.substr(0, eq)));
            }
        }
        i += tok.size();
    }
    return {};
}

std::vector<memory::RamBlockSpec> effective_ram(const Config& c) {
    if (!c.ram.empty()) return c.ram;
    return {memory::RamBlockSpec{"pc.ram", 0, kDefaultRam, memory::HugePages::transparent}};
}

}  // namespace vmm::config

#include "vmmd/daemon/qemu_procedures.h"

#include <fmt/format.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

#include "vmm/common/log.h"
#include "vmmd/domain/domain_args.h"

namespace vmmd {

namespace {

using rpc::Access;
using rpc::Reply;
using vmm::monitor::Json;

constexpr const char* kMonitorCommand = "QEMU_PROC_DOMAIN_MONITOR_COMMAND";
constexpr int32_t kMonitorCommandNumber = 1;
constexpr size_t kLoggedCommand = 200;  // how much of a command the log line quotes

// A QMP error reply as QEMU words one ({"error": {"class", "desc"}}), the request's id echoed.
Json qmp_error_reply(const std::string& desc, const Json* id) {
    Json reply = {{"error", {{"class", "GenericError"}, {"desc", desc}}}};
    if (id != nullptr) reply["id"] = *id;
    return reply;
}

// The command as the log quotes it: its first kLoggedCommand bytes, a control character (a
// client's newline, an escape) shown as '?', so that one command is one log line.
std::string logged(const std::string& cmd) {
    std::string out = cmd.substr(0, kLoggedCommand);
    for (char& c : out)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    return cmd.size() > kLoggedCommand ? out + "…" : out;
}

Reply text_reply(const Json& reply) {
    std::string text = vmm::monitor::to_text(reply);
    if (text.size() > rpc::kMaxString) {
        return rpc::fail(VIR_ERR_OPERATION_FAILED, fmt::format("{}: the vmm's reply is {} bytes, more than libvirt's strings "
                                                               "hold ({})", kMonitorCommand, text.size(), rpc::kMaxString));
    }
    return rpc::ok_string(text);
}

Reply qmp_command(const DomainView& v, const std::string& cmd, const MonitorCall& call) {
    auto request = vmm::monitor::parse_request(cmd);
    if (!request || !request->is_object()) {
        return rpc::fail(VIR_ERR_INVALID_ARG,
                         fmt::format("{}: not a QMP request ({}): a JSON object such as {{\"execute\":\"query-status\"}}, "
                                     "or --hmp for a line of the text monitor",
                                     kMonitorCommand, request ? "not an object" : request.error().message()));
    }
    const Json* id = vmm::monitor::member(*request, "id");
    auto execute = vmm::monitor::string_member(*request, "execute");
    if (!execute) return text_reply(qmp_error_reply("QMP input lacks member 'execute' (a string)", id));
    Json args = Json::object();
    if (const Json* a = vmm::monitor::member(*request, "arguments")) {
        if (!a->is_object()) return text_reply(qmp_error_reply("QMP input member 'arguments' must be an object", id));
        args = *a;
    }
    auto r = call(v.def.uuid, *execute, args);
    if (!r) return text_reply(qmp_error_reply(r.error().message(), id));
    Json reply = {{"return", *r}};
    if (id != nullptr) reply["id"] = *id;
    return text_reply(reply);
}

Reply hmp_command(const DomainView& v, const std::string& line, const MonitorCall& call) {
    auto r = call(v.def.uuid, "human-monitor-command", Json{{"command-line", line}});
    if (!r) return rpc::fail(VIR_ERR_OPERATION_FAILED, fmt::format("{}: {}", kMonitorCommand, r.error().message()));
    auto text = vmm::monitor::as_string(*r);
    if (!text) return rpc::fail(VIR_ERR_OPERATION_FAILED, fmt::format("{}: the vmm answered no text", kMonitorCommand));
    return rpc::ok_string(*text);
}

}  // namespace

Reply monitor_command(const DomainView& v, const std::string& cmd, uint32_t flags, const MonitorCall& call) {
    if ((flags & ~static_cast<uint32_t>(VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP)) != 0) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("{}: unsupported flags ({:#x}): only HMP ({:#x})", kMonitorCommand,
                                                          flags, static_cast<unsigned>(VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP)));
    }
    if (!v.active()) return not_running(v);
    vmm::log::info("vmmd: domain '{}': custom monitor command from a client ({}): {}", v.def.name,
                   (flags & VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP) != 0 ? "HMP" : "QMP",
                   logged(cmd));
    if ((flags & VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP) != 0) return hmp_command(v, cmd, call);
    return qmp_command(v, cmd, call);
}

std::vector<rpc::Procedure> qemu_procedures(const DomainStore& store, MonitorCall call) {
    std::vector<rpc::Procedure> t;
    t.emplace_back(rpc::kQemuProgram, kMonitorCommandNumber, kMonitorCommand, Access::write,
                   on_domain(store, kMonitorCommand, [call = std::move(call)](const DomainView& v, xdr::Reader& a) {
                       auto cmd = a.string(rpc::kMaxString);
                       auto flags = a.u32();
                       if (!cmd || !flags) return undecodable(kMonitorCommand);
                       return monitor_command(v, *cmd, *flags, call);
                   }));
    return t;
}

}  // namespace vmmd

#include "vmmd/rpc/dispatch.h"

#include <fmt/format.h>
#include <libvirt/virterror.h>

#include <algorithm>

namespace vmmd::rpc {

Reply ok(xdr::Writer&& w) { return Reply{w.take(), std::nullopt}; }
Reply ok() { return Reply{}; }
Reply ok_i32(int32_t v) {
    xdr::Writer w;
    w.i32(v);
    return ok(std::move(w));
}
Reply ok_u64(uint64_t v) {
    xdr::Writer w;
    w.u64(v);
    return ok(std::move(w));
}
Reply ok_string(const std::string& s) {
    xdr::Writer w;
    w.string(s);
    return ok(std::move(w));
}
int32_t error_domain(int32_t code) {
    switch (code) {
        // The protocol itself: what does not decode, frame or authenticate, and a procedure vmmd
        // does not serve (libvirtd's dispatcher answers an unknown one from its RPC code too).
        case VIR_ERR_RPC:
        case VIR_ERR_NO_SUPPORT:
        case VIR_ERR_AUTH_FAILED:
        case VIR_ERR_NO_CONNECT:
        case VIR_ERR_OPERATION_DENIED: return VIR_FROM_RPC;
        // A definition that is not one vmm can take.
        case VIR_ERR_XML_ERROR:
        case VIR_ERR_XML_DETAIL: return VIR_FROM_DOMAIN;
        // Everything else is an operation on a domain (or the host beside it).
        default: return VIR_FROM_DOM;
    }
}

Reply fail(int32_t code, std::string message) {
    RemoteError e;
    e.code = code;
    e.domain = error_domain(code);
    e.message = std::move(message);
    return Reply{{}, std::move(e)};
}

const Procedure* Dispatcher::find(uint32_t program, int32_t number) const {
    for (const Procedure& p : table_)
        if (p.program == program && p.number == number) return &p;
    return nullptr;
}

bool Dispatcher::serves(uint32_t program) const {
    return program == kRemoteProgram || std::any_of(table_.begin(), table_.end(), [program](const Procedure& p) { return p.program == program; });
}

std::string Dispatcher::name_of(uint32_t program, int32_t number) const {
    if (const Procedure* p = find(program, number)) return p->name;
    if (program != kRemoteProgram) return fmt::format("procedure {} of program {:#x}", number, program);
    if (const char* n = remote_procedure_name(number)) return n;
    return fmt::format("procedure {}", number);
}

namespace {
// Why `caller` may not call `p`, or "" if it may.
std::string refusal(const Caller& caller, const Procedure& p) {
    if (p.access == Access::unopened) return "";
    if (!caller.opened) return fmt::format("{}: the connection is not open yet (CONNECT_OPEN first)", p.name);
    if (p.access == Access::write && caller.read_only) {
        return fmt::format("{}: this is a read-only connection: it may query, not change anything", p.name);
    }
    return "";
}

Reply run(Caller& caller, const Procedure& p, const Message& m) {
    if (std::string why = refusal(caller, p); !why.empty()) {
        return fail(caller.opened ? VIR_ERR_OPERATION_DENIED : VIR_ERR_OPERATION_INVALID, why);
    }
    xdr::Reader args(m.payload);
    Reply r = p.handler(caller, args);
    if (!r.error)
        if (auto done = args.finish(); !done) return fail(VIR_ERR_RPC, fmt::format("{}: {}", p.name, done.error().message()));
    return r;
}
}  // namespace

std::vector<uint8_t> Dispatcher::call(Caller& caller, const Message& m) const {
    Header h = m.header;
    h.type = Type::reply;
    h.status = ReplyStatus::ok;
    Reply r;
    // Both programs vmmd serves are at version 1 (kRemoteVersion, kQemuVersion).
    const char* program = m.header.program == kQemuProgram ? "QEMU" : "remote";
    if (m.header.version != kRemoteVersion) {
        r = fail(VIR_ERR_RPC, fmt::format("version {} of the {} program: vmmd speaks version {}", m.header.version, program, kRemoteVersion));
    } else if (const Procedure* p = find(m.header.program, m.header.procedure)) {
        r = run(caller, *p, m);
    } else {
        r = fail(VIR_ERR_NO_SUPPORT, fmt::format("this function is not supported by the vmm driver: {}",
                                                 name_of(m.header.program, m.header.procedure)));
    }
    if (!r.error) return encode_message(h, r.payload);
    h.status = ReplyStatus::error;
    return encode_message(h, encode_error(*r.error));
}

}  // namespace vmmd::rpc

// The server side of one RPC program: a table of procedures, each with its name, who may call
// it, and a handler that decodes its arguments and encodes its return value. A call to a
// procedure not in the table, or refused, is answered with libvirt's error (never a hang or a
// dropped connection); so is a call whose arguments do not decode.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vmmd/rpc/message.h"
#include "vmmd/rpc/procedures.h"

namespace vmmd::rpc {

// A handler's answer: the return value's bytes, or libvirt's error.
struct Reply {
    std::vector<uint8_t> payload;
    std::optional<RemoteError> error;
};
Reply ok(xdr::Writer&& w);
Reply ok();  // a procedure with no return value
Reply ok_i32(int32_t v);                 // the common one-value returns
Reply ok_u64(uint64_t v);
Reply ok_string(const std::string& s);
Reply fail(int32_t code, std::string message);  // in the error domain of `code` (error_domain)
// libvirt's error domain (virErrorDomain) for an error code vmmd answers with: VIR_FROM_RPC for
// the protocol's own, VIR_FROM_DOMAIN for a definition refused, VIR_FROM_DOM for the rest.
int32_t error_domain(int32_t code);

// What a client connection may do.
enum class Access {
    unopened,   // before CONNECT_OPEN too (AUTH_LIST, CONNECT_OPEN, SUPPORTS_FEATURE)
    read_only,  // once opened, also on a read-only connection (queries)
    write,      // once opened, not on a read-only connection (anything that changes state)
};

// The per-connection state procedures see.
struct Caller {
    bool opened = false;
    bool read_only = false;  // the read-only socket, or VIR_CONNECT_RO at open
    std::string uri;         // what CONNECT_OPEN named
    bool closed = false;     // CONNECT_CLOSE: the server ends the connection after its reply
    uint64_t connection = 0; // which connection (the server numbers them from 1): whom events go to
    bool secure = true;      // a unix socket on this host; false over TCP (nothing is encrypted)
};

using Handler = std::function<Reply(Caller&, xdr::Reader&)>;

struct Procedure {
    // One of libvirt's procedures (procedures.h): its number and name from the table.
    Procedure(Proc p, Access a, Handler h) : Procedure(number_of(p), name_of(p), a, std::move(h)) {}
    Procedure(int32_t n, const char* nm, Access a, Handler h) : number(n), name(nm), access(a), handler(std::move(h)) {}
    // A procedure of another of libvirt's programs (the QEMU program's, qemu_protocol.x).
    Procedure(uint32_t prog, int32_t n, const char* nm, Access a, Handler h)
        : program(prog), number(n), name(nm), access(a), handler(std::move(h)) {}
    uint32_t program = kRemoteProgram;
    int32_t number = 0;
    const char* name = "";
    Access access = Access::write;
    Handler handler;
};

class Dispatcher {
public:
    explicit Dispatcher(std::vector<Procedure> table) : table_(std::move(table)) {}
    // Whether a procedure of `program` is in the table (libvirt's remote program always is).
    bool serves(uint32_t program) const;
    // Answers one call of a program it serves: the reply message, length word included.
    std::vector<uint8_t> call(Caller& caller, const Message& m) const;
    // The remote program's procedure's name in the table, or "procedure N".
    std::string name_of(int32_t number) const { return name_of(kRemoteProgram, number); }
    std::string name_of(uint32_t program, int32_t number) const;

private:
    const Procedure* find(uint32_t program, int32_t number) const;
    std::vector<Procedure> table_;
};

// libvirt's names of the remote program's procedures that vmmd does not serve, for the
// NO_SUPPORT error (procedure_names.cc); nullptr when unknown.
const char* remote_procedure_name(int32_t number);

}  // namespace vmmd::rpc

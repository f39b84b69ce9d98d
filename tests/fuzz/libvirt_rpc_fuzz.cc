// libFuzzer target for vmmd's side of libvirt's RPC: the input is what a client sends on one
// connection, read as vmmd reads it (length word, then header and payload), each call answered
// by the connection-level procedures. Any crash, sanitizer report or reply of ours that does not
// decode is a bug; an input that does not frame ends the connection, as it does in vmmd.
#include <cstddef>
#include <cstdint>
#include <span>

#include "vmmd/daemon/connect_procedures.h"
#include "vmmd/rpc/message.h"

using namespace vmmd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const rpc::Dispatcher dispatcher(connect_procedures({"vmm:///system", 1000, "/usr/bin/vmm"}));
    rpc::Caller caller;
    std::span<const uint8_t> in(data, size);
    while (in.size() >= rpc::kLengthSize && !caller.closed) {
        auto n = rpc::decode_length(in.first<rpc::kLengthSize>());
        if (!n || *n > in.size() - rpc::kLengthSize) return 0;
        auto body = in.subspan(rpc::kLengthSize, *n);
        in = in.subspan(rpc::kLengthSize + *n);
        auto m = rpc::decode_message(body);
        if (!m) return 0;
        (void)rpc::decode_error(m->payload);  // what a client's error reply would go through
        if (m->header.program != rpc::kRemoteProgram || m->header.type != rpc::Type::call) continue;
        auto reply = dispatcher.call(caller, *m);
        auto back = rpc::decode_message(std::span(reply).subspan(rpc::kLengthSize));
        if (!back) __builtin_trap();
        if (back->header.status == rpc::ReplyStatus::error && !rpc::decode_error(back->payload)) __builtin_trap();
    }
    return 0;
}

// libFuzzer target for what one vmmd takes from another (or from a client) during a migration:
// the cookie (JSON), the typed-parameter list (XDR) and the migration URI (with its fallback).
// Any crash or sanitizer report is a bug, and so is a value that decodes but does not survive
// encoding and decoding again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "vmmd/migration/cookie.h"
#include "vmmd/migration/migration_uri.h"
#include "vmmd/rpc/typed_params.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::span<const uint8_t> in(data, size);
    if (auto c = vmmd::decode_cookie(in); c && *c) {
        auto again = vmmd::decode_cookie(vmmd::encode_cookie(**c));
        if (!again || !*again || !(**again == **c)) __builtin_trap();
    }
    vmmd::xdr::Reader r(in);
    if (auto ps = vmmd::rpc::decode_typed_params(r)) {
        vmmd::xdr::Writer w;
        vmmd::rpc::encode_typed_params(w, *ps);
        vmmd::xdr::Reader r2(w.bytes());
        auto again = vmmd::rpc::decode_typed_params(r2);
        // NaN is the one value that is not equal to itself.
        if (!again || again->size() != ps->size()) __builtin_trap();
    }
    std::string text(reinterpret_cast<const char*>(data), size);
    if (auto u = vmmd::parse_migration_uri(text); u && u->port != 0) {
        auto again = vmmd::parse_migration_uri(vmmd::libvirt_uri(*u));
        if (!again || vmmd::vmm_uri(*again) != vmmd::vmm_uri(*u) || vmmd::vmm_fallback_uri(*again) != vmmd::vmm_fallback_uri(*u))
            __builtin_trap();
    }
    return 0;
}

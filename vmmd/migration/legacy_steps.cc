#include "vmmd/migration/legacy_steps.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>

#include <array>

#include "vmmd/migration/cookie.h"
#include "vmmd/rpc/message.h"
#include "vmmd/rpc/typed_params.h"

namespace vmmd {

using vmm::Error;
using vmm::Result;

namespace {

using Params = std::vector<rpc::TypedParam>;

// A remote_nonnull_domain copied through: name, UUID, id.
bool copy_domain(xdr::Reader& r, xdr::Writer& w) {
    auto name = r.string(rpc::kMaxString);
    std::array<uint8_t, 16> uuid{};
    auto got = r.fixed_opaque(uuid);
    auto id = r.i32();
    if (!name || !got || !id) return false;
    w.string(*name);
    w.fixed_opaque(uuid);
    w.i32(*id);
    return true;
}

// Migration flags travel as a hyper in the old steps and a word in the new: every flag libvirt
// defines fits in the word.
Result<uint32_t> narrow_flags(uint64_t flags) {
    if (flags > UINT32_MAX) return Error(fmt::format("migration flags {:#x}: no libvirt flag is above bit 31", flags));
    return static_cast<uint32_t>(flags);
}

void add_string(Params& p, const char* name, const std::optional<std::string>& v) {
    if (v) p.push_back({name, *v});
}

void add_bandwidth(Params& p, uint64_t resource) {
    if (resource != 0) p.push_back({VIR_MIGRATE_PARAM_BANDWIDTH, resource});
}

Error undecodable_args(const char* proc) { return Error(fmt::format("{}: arguments that do not decode", proc)); }

}  // namespace

Result<std::vector<uint8_t>> begin3_as_params(xdr::Reader& r) {
    xdr::Writer w;
    if (!copy_domain(r, w)) return undecodable_args("DOMAIN_MIGRATE_BEGIN3");
    auto xmlin = r.optional_string(rpc::kMaxString);
    auto flags = r.u64();
    auto dname = r.optional_string(rpc::kMaxString);
    auto resource = r.u64();
    if (!xmlin || !flags || !dname || !resource) return undecodable_args("DOMAIN_MIGRATE_BEGIN3");
    auto f = narrow_flags(*flags);
    if (!f) return f.error();
    Params p;
    add_string(p, VIR_MIGRATE_PARAM_DEST_XML, *xmlin);
    add_string(p, VIR_MIGRATE_PARAM_DEST_NAME, *dname);
    add_bandwidth(p, *resource);
    rpc::encode_typed_params(w, p);
    w.u32(*f);
    return w.take();
}

Result<std::vector<uint8_t>> prepare3_as_params(xdr::Reader& r) {
    auto cookie = r.opaque(kMaxCookie);
    auto uri = r.optional_string(rpc::kMaxString);
    auto flags = r.u64();
    auto dname = r.optional_string(rpc::kMaxString);
    auto resource = r.u64();
    auto xml = r.string(rpc::kMaxString);
    if (!cookie || !uri || !flags || !dname || !resource || !xml) return undecodable_args("DOMAIN_MIGRATE_PREPARE3");
    auto f = narrow_flags(*flags);
    if (!f) return f.error();
    Params p;
    add_string(p, VIR_MIGRATE_PARAM_URI, *uri);
    add_string(p, VIR_MIGRATE_PARAM_DEST_NAME, *dname);
    add_string(p, VIR_MIGRATE_PARAM_DEST_XML, *xml);
    add_bandwidth(p, *resource);
    xdr::Writer w;
    rpc::encode_typed_params(w, p);
    w.opaque(*cookie);
    w.u32(*f);
    return w.take();
}

Result<std::vector<uint8_t>> perform3_as_params(xdr::Reader& r) {
    xdr::Writer w;
    if (!copy_domain(r, w)) return undecodable_args("DOMAIN_MIGRATE_PERFORM3");
    auto xmlin = r.optional_string(rpc::kMaxString);
    auto cookie = r.opaque(kMaxCookie);
    auto dconnuri = r.optional_string(rpc::kMaxString);
    auto uri = r.optional_string(rpc::kMaxString);
    auto flags = r.u64();
    auto dname = r.optional_string(rpc::kMaxString);
    auto resource = r.u64();
    if (!xmlin || !cookie || !dconnuri || !uri || !flags || !dname || !resource) return undecodable_args("DOMAIN_MIGRATE_PERFORM3");
    auto f = narrow_flags(*flags);
    if (!f) return f.error();
    Params p;
    add_string(p, VIR_MIGRATE_PARAM_URI, *uri);
    add_string(p, VIR_MIGRATE_PARAM_DEST_XML, *xmlin);
    add_string(p, VIR_MIGRATE_PARAM_DEST_NAME, *dname);
    add_bandwidth(p, *resource);
    w.optional_string(*dconnuri);
    rpc::encode_typed_params(w, p);
    w.opaque(*cookie);
    w.u32(*f);
    return w.take();
}

Result<std::vector<uint8_t>> finish3_as_params(xdr::Reader& r) {
    auto dname = r.string(rpc::kMaxString);
    auto cookie = r.opaque(kMaxCookie);
    auto dconnuri = r.optional_string(rpc::kMaxString);
    auto uri = r.optional_string(rpc::kMaxString);
    auto flags = r.u64();
    auto cancelled = r.i32();
    if (!dname || !cookie || !dconnuri || !uri || !flags || !cancelled) return undecodable_args("DOMAIN_MIGRATE_FINISH3");
    auto f = narrow_flags(*flags);
    if (!f) return f.error();
    Params p;
    add_string(p, VIR_MIGRATE_PARAM_DEST_NAME, *dname);
    add_string(p, VIR_MIGRATE_PARAM_URI, *uri);
    xdr::Writer w;
    rpc::encode_typed_params(w, p);
    w.opaque(*cookie);
    w.u32(*f);
    w.i32(*cancelled);
    return w.take();
}

Result<std::vector<uint8_t>> confirm3_as_params(xdr::Reader& r) {
    xdr::Writer w;
    if (!copy_domain(r, w)) return undecodable_args("DOMAIN_MIGRATE_CONFIRM3");
    auto cookie = r.opaque(kMaxCookie);
    auto flags = r.u64();
    auto cancelled = r.i32();
    if (!cookie || !flags || !cancelled) return undecodable_args("DOMAIN_MIGRATE_CONFIRM3");
    auto f = narrow_flags(*flags);
    if (!f) return f.error();
    rpc::encode_typed_params(w, {});
    w.opaque(*cookie);
    w.u32(*f);
    w.i32(*cancelled);
    return w.take();
}

}  // namespace vmmd

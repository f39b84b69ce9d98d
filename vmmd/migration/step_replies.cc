#include "vmmd/migration/step_replies.h"

#include "vmmd/domain/domain_args.h"
#include "vmmd/migration/cookie.h"

namespace vmmd {

rpc::Reply prepared_reply(const std::string& hostname, const DomainDef& def, const MigrationUri& told) {
    xdr::Writer w;
    w.opaque(encode_cookie({hostname, def.name, def.uuid, std::nullopt}));
    w.optional_string(libvirt_uri(told));
    return rpc::ok(std::move(w));
}

rpc::Reply finished_reply(const std::string& hostname, const DomainStore& store, const Uuid& uuid) {
    auto now = store.by_uuid(uuid);
    if (!now) return no_domain("the domain ended as its migration finished");
    xdr::Writer w;
    put_domain(w, *now);
    w.opaque(encode_cookie({hostname, now->def.name, now->def.uuid, std::nullopt}));
    return rpc::ok(std::move(w));
}

}  // namespace vmmd

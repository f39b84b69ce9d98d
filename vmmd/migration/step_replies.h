// The answers two of the migration steps give, the same for a migration and for a postcopy
// recovery: Prepare3's (this vmmd's cookie and the URI the source connects to) and Finish3's
// (the domain as it runs here, and the cookie).
#pragma once

#include <string>

#include "vmmd/domain/domain_store.h"
#include "vmmd/migration/migration_uri.h"
#include "vmmd/rpc/dispatch.h"

namespace vmmd {

rpc::Reply prepared_reply(const std::string& hostname, const DomainDef& def, const MigrationUri& told);
rpc::Reply finished_reply(const std::string& hostname, const DomainStore& store, const Uuid& uuid);

}  // namespace vmmd

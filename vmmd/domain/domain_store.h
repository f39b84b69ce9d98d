// DomainStore: the domains vmmd knows. A persistent domain's definition is one file,
// <state>/domains/<uuid>.xml, written atomically (a temporary file, fsync, rename, fsync of the
// directory), so a crash leaves the old definition or the new one, never half of either. At
// start every file is read back; one that no longer parses is named in the log and left where it
// is (nothing is deleted on the daemon's own authority). Thread-safe: every client's thread calls
// it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/result.h"
#include "vmmd/domain/domain_def.h"

namespace vmmd {

// libvirt's view of a domain's state (virDomainState and its reason).
struct DomainState {
    int state = 5;   // VIR_DOMAIN_SHUTOFF
    int reason = 0;  // ..._UNKNOWN
};

// A domain as a caller sees it at one moment.
struct DomainView {
    DomainDef def;
    bool persistent = true;
    int id = -1;  // -1 while it does not run
    DomainState state;
    bool active() const { return id >= 0; }
};

class DomainStore {
public:
    using UuidSource = std::function<Uuid()>;
    // Reads every definition under `state_dir`/domains (made if missing); `random_uuid` names a
    // hand-written file without a <uuid>. `warn` hears about files that are skipped.
    static vmm::Result<std::unique_ptr<DomainStore>> open(const std::string& state_dir, UuidSource random_uuid,
                                                          const std::function<void(const std::string&)>& warn);

    // DOMAIN_DEFINE_XML: a new domain, or a new definition of one with the same name and UUID.
    // The same name with another UUID, or the same UUID with another name, is refused.
    vmm::Result<DomainView> define(const DomainDef& def);
    // DOMAIN_UNDEFINE: forgets the definition (a running domain becomes transient).
    vmm::Status undefine(const Uuid& uuid);

    std::vector<DomainView> list() const;
    std::optional<DomainView> by_uuid(const Uuid& uuid) const;
    std::optional<DomainView> by_name(const std::string& name) const;
    std::optional<DomainView> by_id(int id) const;

private:
    explicit DomainStore(std::string dir) : dir_(std::move(dir)) {}
    std::string path_of(const Uuid& uuid) const;
    vmm::Status write_definition(const DomainDef& d) const;

    std::string dir_;  // <state>/domains
    mutable std::mutex mutex_;
    std::map<Uuid, DomainView> domains_;
};

}  // namespace vmmd

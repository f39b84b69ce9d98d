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
    bool operator==(const DomainState&) const = default;
};

// A domain as a caller sees it at one moment.
struct DomainView {
    DomainDef def;
    bool persistent = true;
    bool autostart = false;  // started when vmmd first starts in a boot of the host
    int id = -1;  // -1 while it does not run
    DomainState state;
    bool active() const { return id >= 0; }
};

class DomainStore {
public:
    using UuidSource = std::function<Uuid()>;
    // Why a domain's definition may not change now (a migration with change protection runs), or
    // nullopt; consulted by define (of a domain that exists), undefine, edit and set_autostart.
    using Guard = std::function<std::optional<std::string>(const Uuid& uuid)>;
    void set_guard(Guard guard) { guard_ = std::move(guard); }
    // Reads every definition under `state_dir`/domains (made if missing); `random_uuid` names a
    // hand-written file without a <uuid>. `warn` hears about files that are skipped.
    static vmm::Result<std::unique_ptr<DomainStore>> open(const std::string& state_dir, UuidSource random_uuid,
                                                          const std::function<void(const std::string&)>& warn);

    // DOMAIN_DEFINE_XML: a new domain, or a new definition of one with the same name and UUID.
    // The same name with another UUID, or the same UUID with another name, is refused.
    vmm::Result<DomainView> define(const DomainDef& def);
    // DOMAIN_UNDEFINE: forgets the definition (a running domain becomes transient).
    vmm::Status undefine(const Uuid& uuid);
    // DOMAIN_SET_AUTOSTART: marks a persistent domain (a file in <state>/autostart named by its
    // UUID, as libvirt's autostart links) to be started when vmmd starts in a new boot.
    vmm::Status set_autostart(const Uuid& uuid, bool on);
    // virsh desc, metadata, setmem --config: `change` applied to the running domain's definition
    // (`live`: it must run) and to the persistent one (`config`: it must be persistent; written
    // to disk, used from the next start). A change refused by `change` changes nothing.
    vmm::Status edit(const Uuid& uuid, bool live, bool config, const std::function<vmm::Status(DomainDef&)>& change);
    // The definition the next start uses: nullopt for a transient domain.
    std::optional<DomainDef> config_of(const Uuid& uuid) const;
    // DOMAIN_CREATE_XML: a domain with no definition on disk, forgotten when it stops. Its name
    // and UUID must be new.
    vmm::Result<DomainView> add_transient(const DomainDef& def);

    // What the supervisor saw. set_running: the domain runs as `id` with the definition `live`
    // (after a restart of vmmd, the stored one may be newer: it waits for the next start); set_state: a running
    // domain's state changed (ignored for one that does not run); set_stopped: it no longer runs
    // (a transient one is forgotten; a definition given while it ran takes effect).
    void set_running(const Uuid& uuid, int id, DomainState state, const DomainDef& live);
    void set_state(const Uuid& uuid, DomainState state);
    void set_stopped(const Uuid& uuid, DomainState state);

    std::vector<DomainView> list() const;
    std::optional<DomainView> by_uuid(const Uuid& uuid) const;
    std::optional<DomainView> by_name(const std::string& name) const;
    std::optional<DomainView> by_id(int id) const;

private:
    DomainStore(std::string dir, std::string autostart_dir) : dir_(std::move(dir)), autostart_dir_(std::move(autostart_dir)) {}
    std::string path_of(const Uuid& uuid) const;
    std::string autostart_path(const Uuid& uuid) const;
    vmm::Status write_definition(const DomainDef& d) const;

    std::string dir_;            // <state>/domains
    std::string autostart_dir_;  // <state>/autostart
    mutable std::mutex mutex_;
    std::map<Uuid, DomainView> domains_;
    std::map<Uuid, DomainDef> next_boot_;
    Guard guard_;  // defined while running: the definition for the next start
};

}  // namespace vmmd

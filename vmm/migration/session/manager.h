// MigrationManager: the one place the monitor and main() start, cancel and inspect migrations.
// It owns the settings (capabilities, parameters), the transport registry, the outgoing
// migration (kept after it ends, for its stats) and the incoming one.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "vmm/machine/machine.h"
#include "vmm/migration/session/params.h"
#include "vmm/migration/session/destination.h"
#include "vmm/migration/session/file_serving.h"
#include "vmm/migration/transport/registry.h"
#include "vmm/migration/session/source.h"

namespace vmm::migration {

class MigrationManager {
public:
    using EventFn = std::function<void(MigrationStatus)>;
    using StallFn = SourceCore::StallFn;
    using FailFn = std::function<void(const Error&)>;

    // `on_event`: each status change; `on_stall`: an outgoing precopy stalled (x-stall-timeout).
    MigrationManager(machine::Machine& m, EventFn on_event, StallFn on_stall = {});
    ~MigrationManager();

    Status set_capability(const std::string& name, bool on);
    Status set_parameter(const std::string& name, const std::string& value);
    Settings settings() const;

    // Outgoing. Refused while another migration is in progress.
    Status migrate(const std::string& uri);
    // Refused in postcopy: the guest already runs on the destination.
    Status cancel();
    // migrate_start_postcopy.
    Status start_postcopy();
    // Postcopy recovery after a broken link: migrate -r on the source (resume), migrate_recover
    // on the destination (recover); migrate_pause cuts the link of either side's postcopy.
    Status resume(const std::string& uri);
    Status recover(const std::string& uri);
    Status pause();
    // Incoming: listens now (errors are immediate), then receives on a thread. "defer" waits
    // for a later incoming() call (migrate_incoming).
    Status incoming(const std::string& uri, bool stay_paused, FailFn on_failure);
    bool incoming_deferred() const;

    MigrationStats query() const;

    // x-pull-serve: the saved guest in `path` served for clones to pull at `uri` (one server at
    // a time; file_serving.h); stop_serving ends it, cutting its clients off.
    Status serve(const std::string& path, const std::string& uri);
    Status stop_serving();
    struct Serving {
        std::string path, uri;
        uint64_t size = 0;
        std::vector<PullClient> clients;
    };
    std::optional<Serving> serving() const;

private:
    // The rows of the transport a name belongs to (SCHEME-... or x-SCHEME-...): true once declared,
    // false when no transport has that scheme, an error when its plugin is there but cannot load.
    Result<bool> declare_plugin_names(const std::string& name);
    Status check_deadline_strategy_usable(const Options& o);
    // `set()` again once the name's transport has declared its rows; else what `first` said.
    Status retry_with_plugin_names(const std::string& name, Status first, const std::function<Status()>& set);
    void declare_names(const Transport& t);
    Status check_not_taken(const std::string& name) const;  // the capability and parameter names `t` reads
    Status check_tls(const Transport& t) const;  // tls-creds set: only a transport that carries TLS
    // x-fallback-uri's way (none when unset), or why it cannot be one; `own` is the migration's.
    Result<std::optional<ResumeTo>> fallback_way(Transport& own);

    machine::Machine& machine_;
    EventFn on_event_;
    StallFn on_stall_;
    mutable std::mutex mutex_;
    std::shared_ptr<SharedSettings> settings_ = std::make_shared<SharedSettings>();
    TransportRegistry registry_;
    std::unique_ptr<MigrationSource> outgoing_;
    std::optional<uint64_t> last_save_;  // the last completed file save, if no migration came after it
    std::unique_ptr<IncomingMigration> incoming_;
    bool deferred_ = false;
    std::unique_ptr<FileServing> serving_;
    // Loads each transport plugin in the search path and warms it up (Transport::warm_up), so a
    // first migration over it does not wait for what every connection of this process needs.
    void warm_transports();
    std::thread warm_;  // last: started once everything above is built, joined first
};

}  // namespace vmm::migration

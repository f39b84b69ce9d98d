// What every part of an incoming migration shares (IncomingMigration and the parts it is made
// of: PrecopyWait, FileRestore): the machine, the settings the migration runs with, the listener
// and the connection in use, and the statistics the monitors read, under one mutex. Private to
// the session.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>

#include "vmm/machine/machine.h"
#include "vmm/migration/core/stats.h"
#include "vmm/migration/precopy/ram_loader.h"
#include "vmm/migration/transport/ram_verifier.h"
#include "vmm/migration/transport/transport.h"
#include "vmm/stream/cancel.h"

namespace vmm::migration {

struct DestinationCore {
    using StatusFn = std::function<void(MigrationStatus)>;
    using FailFn = std::function<void(const Error&)>;

    DestinationCore(machine::Machine& m, Uri u, Options o, stream::CancelToken c, bool paused, StatusFn s, FailFn f);

    machine::Machine& machine;
    Uri uri;
    Options options;  // the settings this migration runs with: read again when a source connects
    stream::CancelToken cancel;
    bool stay_paused;  // -S: the guest waits for 'cont' after GO
    StatusFn on_status;
    FailFn on_failure;
    std::unique_ptr<Listener> listener;
    std::chrono::steady_clock::time_point start;  // when the source connected

    mutable std::mutex mutex;
    MigrationStats stats;         // under mutex
    Connection* live = nullptr;   // under mutex: the connection in use (for migrate_pause)

    void set_status(MigrationStatus s);
    // REFUSED with the reason, best effort: the source learns why (the connection may be gone).
    static void refuse(stream::ByteStream& st, const Error& e);
    // The loader's and the channel's figures into stats.
    void publish(const StreamLoader& loader, const DestRamChannel* channel, const RamVerifier* verifier);
};

}  // namespace vmm::migration

// The record of a running domain, <state>/run/<uuid>.json, written when its vmm starts and
// removed when it ends: what a restarted vmmd needs to adopt the process again (which process,
// the domain id, the definition it runs with, whether it was transient). Read back through
// json_access: a damaged record is an error naming the member, never a crash.
#pragma once

#include <string>
#include <string_view>

#include "vmm/common/result.h"
#include "vmmd/domain/domain_store.h"
#include "vmmd/runtime/vmm_process.h"

namespace vmmd {

// Where a migration of the domain stood when vmmd last wrote the record: what a restarted vmmd
// decides by (adoption.h), as libvirt's QEMU driver decides by its job's phase.
enum class MigrationPhase {
    none,
    incoming,       // the destination: started for a migration, its Finish has not resumed it
    outgoing,       // the source: Perform runs, its answer has not gone to the client
    outgoing_done,  // the source: Perform answered; Confirm has not come
};
std::string_view phase_name(MigrationPhase p);

struct RunRecord {
    ProcessIdentity process;
    int id = -1;
    DomainState state;  // as vmmd last left it: a restarted vmmd keeps the reason
    std::string xml;  // the definition the process was started with
    MigrationPhase phase = MigrationPhase::none;
    bool operator==(const RunRecord&) const = default;
};

// A running domain's files in <state>/run: its record (".json") and its vmm's QMP socket (".qmp").
std::string run_file(const std::string& state_dir, const Uuid& uuid, const char* suffix);

std::string encode_run_record(const RunRecord& r);
vmm::Result<RunRecord> decode_run_record(std::string_view text);

}  // namespace vmmd

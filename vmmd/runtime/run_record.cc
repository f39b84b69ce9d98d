#include "vmmd/runtime/run_record.h"

#include <climits>

#include "vmm/monitor/client/json_access.h"

namespace vmmd {

using vmm::Error;
using vmm::monitor::Json;

namespace {
constexpr MigrationPhase kPhases[] = {MigrationPhase::none, MigrationPhase::incoming, MigrationPhase::outgoing,
                                      MigrationPhase::outgoing_done};
}  // namespace

std::string_view phase_name(MigrationPhase p) {
    switch (p) {
        case MigrationPhase::none: return "none";
        case MigrationPhase::incoming: return "incoming";
        case MigrationPhase::outgoing: return "outgoing";
        case MigrationPhase::outgoing_done: return "outgoing-done";
    }
    return "?";
}

std::string encode_run_record(const RunRecord& r) {
    Json j{{"pid", r.process.pid}, {"start-ticks", r.process.start_ticks}, {"id", r.id},
            {"state", r.state.state}, {"reason", r.state.reason}, {"xml", r.xml}, {"migration", phase_name(r.phase)}};
    return vmm::monitor::to_text(j) + "\n";
}

vmm::Result<RunRecord> decode_run_record(std::string_view text) {
    auto j = vmm::monitor::parse_request(text, 1 << 20);
    if (!j) return j.error();
    auto pid = vmm::monitor::uint_member(*j, "pid");
    auto ticks = vmm::monitor::uint_member(*j, "start-ticks");
    auto id = vmm::monitor::uint_member(*j, "id");
    auto xml = vmm::monitor::string_member(*j, "xml");
    auto state = vmm::monitor::uint_member(*j, "state");
    auto reason = vmm::monitor::uint_member(*j, "reason");
    if (!pid || *pid == 0 || *pid > INT_MAX) return Error("the record's \"pid\" is missing or not a process id");
    if (!ticks) return Error("the record's \"start-ticks\" is missing or not a number");
    if (!id || *id == 0 || *id > INT_MAX) return Error("the record's \"id\" is missing or not a domain id");
    if (!xml) return Error("the record's \"xml\" is missing or not a string");
    if (!state || *state > 16 || !reason || *reason > 64) return Error("the record's \"state\" or \"reason\" is not one of libvirt's");
    MigrationPhase phase = MigrationPhase::none;  // a record from before phases were kept has none
    if (j->contains("migration")) {
        auto named = vmm::monitor::string_member(*j, "migration");
        const MigrationPhase* found = nullptr;
        for (const MigrationPhase& p : kPhases)
            if (named && *named == phase_name(p)) found = &p;
        if (found == nullptr) return Error("the record's \"migration\" is not a migration phase vmmd knows");
        phase = *found;
    }
    return RunRecord{{static_cast<pid_t>(*pid), *ticks}, static_cast<int>(*id),
                     {static_cast<int>(*state), static_cast<int>(*reason)}, *xml, phase};
}

std::string run_file(const std::string& state_dir, const Uuid& uuid, const char* suffix) {
    return state_dir + "/run/" + format_uuid(uuid) + suffix;
}

}  // namespace vmmd

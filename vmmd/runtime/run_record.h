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

struct RunRecord {
    ProcessIdentity process;
    int id = -1;
    DomainState state;  // as vmmd last left it: a restarted vmmd keeps the reason
    std::string xml;  // the definition the process was started with
    bool operator==(const RunRecord&) const = default;
};

std::string encode_run_record(const RunRecord& r);
vmm::Result<RunRecord> decode_run_record(std::string_view text);

}  // namespace vmmd

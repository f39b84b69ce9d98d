// What the file transport's two sides share (file_save.cc, file_restore.cc): whole reads and
// writes at an offset, and the two halves' constructors; and a restore from a server's copy
// (pull_transport.h). The file transport's, and FileServing's (which checks a file it serves).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "vmm/common/result.h"
#include "vmm/migration/transport/transport.h"

namespace vmm::migration::file {

// The parameter naming the save an incremental one builds on (migrate_set_parameter file-base PATH).
inline constexpr const char* kBaseParameter = "file-base";

// pwrite/pread until every byte is done; `what` names the file in the error ("writing what: ...").
Status write_at(int fd, std::span<const uint8_t> data, uint64_t at, const std::string& what);
Status read_at(int fd, std::span<uint8_t> out, uint64_t at, const std::string& what);

Result<std::unique_ptr<Connection>> open_save(const TransportContext& ctx);
Result<std::unique_ptr<Listener>> open_restore(const TransportContext& ctx);
// A saved guest a server serves (pull.h), restored as a file is: checked at once (its header,
// this machine's shape, its stream), its RAM brought in lazily (or read whole, without
// x-restore-lazy) through `pulled`.
Result<std::unique_ptr<Listener>> open_pulled(const TransportContext& ctx, std::unique_ptr<PulledFile> pulled);

}  // namespace vmm::migration::file

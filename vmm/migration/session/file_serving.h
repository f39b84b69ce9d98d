// FileServing: this vmm serving a saved guest's file for clones to pull (pull.h): `x-pull-serve
// FILE rdma:HOST:PORT`. The file is checked (a full save, whole), read into memory of its own
// (read-only from then on, whatever becomes of the file) and handed to the transport, which
// serves it on threads of its own until destroyed; `info pull-clients` says
// who pulls and how much. The guest this vmm runs, if any, is not involved: to serve it, save it
// first (`stop`, `migrate file:/dev/shm/NAME`), and serve that file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vmm/common/fd.h"
#include "vmm/common/mapping.h"
#include "vmm/common/result.h"
#include "vmm/migration/transport/pull.h"
#include "vmm/migration/transport/registry.h"
#include "vmm/stream/cancel.h"

namespace vmm::migration {

class FileServing {
public:
    // `options`: the settings as the transport reads them (timeouts, its own rows).
    static Result<std::unique_ptr<FileServing>> start(TransportRegistry& registry, const std::string& path,
                                                      const std::string& uri, std::function<Options()> options);
    ~FileServing();

    const std::string& path() const { return path_; }
    const std::string& uri() const { return uri_; }
    uint64_t size() const { return map_.size(); }
    std::vector<PullClient> clients() const { return server_->clients(); }

private:
    FileServing(stream::CancelToken cancel) : cancel_(std::move(cancel)) {}

    std::string path_, uri_;
    Mapping map_;  // the save, read in: what is served
    stream::CancelToken cancel_;
    std::unique_ptr<FileServer> server_;  // last: stopped before the mapping goes
};

}  // namespace vmm::migration

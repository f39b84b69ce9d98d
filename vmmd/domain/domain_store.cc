#include "vmmd/domain/domain_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "vmm/common/fd.h"
#include "vmmd/domain/domain_xml.h"

namespace vmmd {

using vmm::Error;
using vmm::Result;
using vmm::Status;
using vmm::UniqueFd;

namespace {

Status write_fully(int fd, const std::string& text, const std::string& path) {
    size_t done = 0;
    while (done < text.size()) {
        ssize_t w = ::write(fd, text.data() + done, text.size() - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return Error::from_errno("write " + path);
        done += static_cast<size_t>(w);
    }
    return {};
}

Status fsync_path(const std::string& path, int flags) {
    UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC));
    if (!fd.valid() || ::fsync(fd.get()) != 0) return Error::from_errno("fsync " + path);
    return {};
}

}  // namespace

Result<std::unique_ptr<DomainStore>> DomainStore::open(const std::string& state_dir, UuidSource random_uuid,
                                                       const std::function<void(const std::string&)>& warn) {
    std::string dir = state_dir + "/domains";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Error(fmt::format("create {}: {}", dir, ec.message()));
    std::unique_ptr<DomainStore> s(new DomainStore(dir));
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        if (entry.path().extension() != ".xml") continue;
        std::ifstream f(entry.path());
        std::stringstream text;
        text << f.rdbuf();
        auto def = parse_domain_xml(text.str(), random_uuid());
        if (!def) {
            warn(fmt::format("{}: skipped, it no longer parses: {}", entry.path().string(), def.error().message()));
            continue;
        }
        s->domains_[def->uuid] = DomainView{*def, true, -1, {}};
    }
    if (ec) return Error(fmt::format("read {}: {}", dir, ec.message()));
    return s;
}

std::string DomainStore::path_of(const Uuid& uuid) const { return dir_ + "/" + format_uuid(uuid) + ".xml"; }

Status DomainStore::write_definition(const DomainDef& d) const {
    std::string path = path_of(d.uuid), tmp = path + ".new";
    {
        UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
        if (!fd.valid()) return Error::from_errno("create " + tmp);
        if (auto s = write_fully(fd.get(), format_domain_xml(d), tmp); !s) return s;
        if (::fsync(fd.get()) != 0) return Error::from_errno("fsync " + tmp);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) return Error::from_errno("rename " + tmp);
    return fsync_path(dir_, O_RDONLY | O_DIRECTORY);
}

Result<DomainView> DomainStore::define(const DomainDef& def) {
    std::lock_guard lock(mutex_);
    for (const auto& [uuid, v] : domains_) {
        if (v.def.name == def.name && uuid != def.uuid) {
            return Error(fmt::format("domain '{}' already exists with uuid {}", def.name, format_uuid(uuid)));
        }
        if (uuid == def.uuid && v.def.name != def.name) {
            return Error(fmt::format("domain '{}' already has uuid {}", v.def.name, format_uuid(uuid)));
        }
    }
    if (auto s = write_definition(def); !s) return s.error();
    DomainView& v = domains_[def.uuid];
    v.def = def;  // a running domain keeps running on its old definition's process
    v.persistent = true;
    return v;
}

Status DomainStore::undefine(const Uuid& uuid) {
    std::lock_guard lock(mutex_);
    auto it = domains_.find(uuid);
    if (it == domains_.end() || !it->second.persistent) return Error(fmt::format("no persistent domain with uuid {}", format_uuid(uuid)));
    if (::unlink(path_of(uuid).c_str()) != 0 && errno != ENOENT) return Error::from_errno("remove " + path_of(uuid));
    if (it->second.active()) it->second.persistent = false;
    else domains_.erase(it);
    return {};
}

std::vector<DomainView> DomainStore::list() const {
    std::lock_guard lock(mutex_);
    std::vector<DomainView> out;
    for (const auto& [uuid, v] : domains_) out.push_back(v);
    return out;
}

std::optional<DomainView> DomainStore::by_uuid(const Uuid& uuid) const {
    std::lock_guard lock(mutex_);
    auto it = domains_.find(uuid);
    return it == domains_.end() ? std::nullopt : std::optional(it->second);
}

std::optional<DomainView> DomainStore::by_name(const std::string& name) const {
    std::lock_guard lock(mutex_);
    for (const auto& [uuid, v] : domains_)
        if (v.def.name == name) return v;
    return std::nullopt;
}

std::optional<DomainView> DomainStore::by_id(int id) const {
    std::lock_guard lock(mutex_);
    for (const auto& [uuid, v] : domains_)
        if (v.id == id && id >= 0) return v;
    return std::nullopt;
}

}  // namespace vmmd

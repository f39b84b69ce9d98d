#include "vmmd/domain/domain_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "vmmd/domain/atomic_file.h"
#include "vmmd/domain/domain_xml.h"

namespace vmmd {

using vmm::Error;
using vmm::Result;
using vmm::Status;

Result<std::unique_ptr<DomainStore>> DomainStore::open(const std::string& state_dir, UuidSource random_uuid,
                                                       const std::function<void(const std::string&)>& warn) {
    std::string dir = state_dir + "/domains", autostart = state_dir + "/autostart";
    for (const std::string& d : {state_dir, dir, autostart})
        if (auto made = make_private_directory(d); !made) return made.error();
    std::error_code ec;
    std::unique_ptr<DomainStore> s(new DomainStore(dir, autostart));
    std::vector<std::filesystem::path> files;  // in name order: which of two files with one name wins is stable
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
        if (entry.path().extension() == ".xml") files.push_back(entry.path());
    if (ec) return Error(fmt::format("read {}: {}", dir, ec.message()));
    std::sort(files.begin(), files.end());
    for (const auto& path : files) {
        auto text = read_own_file(path.string());
        if (!text) {
            warn(fmt::format("skipped: {}", text.error().message()));
            continue;
        }
        auto def = parse_domain_xml(*text, random_uuid());
        if (!def) {
            warn(fmt::format("{}: skipped, it no longer parses: {}", path.string(), def.error().message()));
            continue;
        }
        if (auto same = s->by_name(def->name); same && same->def.uuid != def->uuid) {
            // Two files, one name: which is meant is a person's call; the second read is left out.
            warn(fmt::format("{}: skipped: domain '{}' is already defined with uuid {}; rename or remove one of them",
                             path.string(), def->name, format_uuid(same->def.uuid)));
            continue;
        }
        bool marked = ::access(s->autostart_path(def->uuid).c_str(), F_OK) == 0;
        s->domains_[def->uuid] = DomainView{*def, true, marked, -1, {}};
    }
    return s;
}

std::string DomainStore::path_of(const Uuid& uuid) const { return dir_ + "/" + format_uuid(uuid) + ".xml"; }
std::string DomainStore::autostart_path(const Uuid& uuid) const { return autostart_dir_ + "/" + format_uuid(uuid); }

Status DomainStore::set_autostart(const Uuid& uuid, bool on) {
    std::lock_guard lock(mutex_);
    if (guard_)
        if (auto why = guard_(uuid)) return Error(*why);
    auto it = domains_.find(uuid);
    if (it == domains_.end()) return Error(fmt::format("no domain with uuid {}", format_uuid(uuid)));
    if (!it->second.persistent) return Error(fmt::format("domain '{}' is transient: it has no definition to start again", it->second.def.name));
    std::string path = autostart_path(uuid);
    if (on) {
        if (auto s = write_file_atomically(path, it->second.def.name + "\n"); !s) return s;
    } else if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        return Error::from_errno("remove " + path);
    }
    it->second.autostart = on;
    return {};
}

Status DomainStore::write_definition(const DomainDef& d) const {
    return write_file_atomically(path_of(d.uuid), format_domain_xml(d));
}

Result<DomainView> DomainStore::define(const DomainDef& def) {
    std::lock_guard lock(mutex_);
    if (guard_ && domains_.count(def.uuid) != 0)
        if (auto why = guard_(def.uuid)) return Error(*why);
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
    if (v.active()) next_boot_[def.uuid] = def;  // the process runs on with the definition it has
    else v.def = def;
    v.persistent = true;
    return v;
}

Status DomainStore::edit(const Uuid& uuid, bool live, bool config, const std::function<Status(DomainDef&)>& change) {
    std::lock_guard lock(mutex_);
    if (guard_)
        if (auto why = guard_(uuid)) return Error(*why);
    auto it = domains_.find(uuid);
    if (it == domains_.end()) return Error(fmt::format("no domain with uuid {}", format_uuid(uuid)));
    DomainView& v = it->second;
    if (live && !v.active()) return Error(fmt::format("domain '{}' is not running", v.def.name));
    if (config && !v.persistent) return Error(fmt::format("domain '{}' is transient: it has no persistent definition", v.def.name));
    auto next = next_boot_.find(uuid);
    DomainDef live_def = v.def, config_def = next != next_boot_.end() ? next->second : v.def;
    if (live)
        if (auto s = change(live_def); !s) return s;
    if (config) {
        if (auto s = change(config_def); !s) return s;
        if (auto s = write_definition(config_def); !s) return s;
    }
    if (v.active() && v.persistent && live_def != config_def) next_boot_[uuid] = config_def;
    else next_boot_.erase(uuid);
    v.def = v.active() ? live_def : config_def;
    return {};
}

std::optional<DomainDef> DomainStore::config_of(const Uuid& uuid) const {
    std::lock_guard lock(mutex_);
    auto it = domains_.find(uuid);
    if (it == domains_.end() || !it->second.persistent) return std::nullopt;
    auto next = next_boot_.find(uuid);
    return next != next_boot_.end() ? next->second : it->second.def;
}

Status DomainStore::undefine(const Uuid& uuid) {
    std::lock_guard lock(mutex_);
    if (guard_)
        if (auto why = guard_(uuid)) return Error(*why);
    auto it = domains_.find(uuid);
    if (it == domains_.end() || !it->second.persistent) return Error(fmt::format("no persistent domain with uuid {}", format_uuid(uuid)));
    if (::unlink(path_of(uuid).c_str()) != 0 && errno != ENOENT) return Error::from_errno("remove " + path_of(uuid));
    (void)::unlink(autostart_path(uuid).c_str());  // as libvirt drops its autostart link
    it->second.autostart = false;
    next_boot_.erase(uuid);
    if (it->second.active()) it->second.persistent = false;
    else domains_.erase(it);
    return {};
}

Result<DomainView> DomainStore::add_transient(const DomainDef& def) {
    std::lock_guard lock(mutex_);
    for (const auto& [uuid, v] : domains_) {
        if (v.def.name == def.name) return Error(fmt::format("domain '{}' already exists with uuid {}", def.name, format_uuid(uuid)));
        if (uuid == def.uuid) return Error(fmt::format("domain '{}' already has uuid {}", v.def.name, format_uuid(uuid)));
    }
    DomainView& v = domains_[def.uuid];
    v.def = def;
    v.persistent = false;
    return v;
}

void DomainStore::set_running(const Uuid& uuid, int id, DomainState state, const DomainDef& live) {
    std::lock_guard lock(mutex_);
    auto it = domains_.find(uuid);
    if (it == domains_.end()) return;
    if (it->second.def != live) {
        if (it->second.persistent && next_boot_.count(uuid) == 0) next_boot_[uuid] = it->second.def;
        it->second.def = live;
    }
    it->second.id = id;
    it->second.state = state;
}

void DomainStore::set_state(const Uuid& uuid, DomainState state) {
    std::lock_guard lock(mutex_);
    auto it = domains_.find(uuid);
    if (it != domains_.end() && it->second.active()) it->second.state = state;
}

void DomainStore::set_stopped(const Uuid& uuid, DomainState state) {
    std::lock_guard lock(mutex_);
    auto it = domains_.find(uuid);
    if (it == domains_.end()) return;
    if (!it->second.persistent) {
        domains_.erase(it);
        return;
    }
    it->second.id = -1;
    it->second.state = state;
    if (auto next = next_boot_.find(uuid); next != next_boot_.end()) {
        it->second.def = std::move(next->second);
        next_boot_.erase(next);
    }
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

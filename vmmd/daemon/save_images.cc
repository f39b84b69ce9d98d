#include "vmmd/daemon/save_images.h"

#include <fcntl.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "vmm/common/fd.h"
#include "vmmd/domain/domain_args.h"
#include "vmmd/domain/atomic_file.h"
#include "vmmd/domain/domain_xml.h"
#include "vmmd/domain/save_image.h"
#include "vmmd/migration/job_stats.h"
#include "vmmd/runtime/log_tail.h"

namespace vmmd {

namespace {

using rpc::Access;
using rpc::Caller;
using rpc::Proc;
using rpc::Reply;
using vmm::Error;
using vmm::Status;
using xdr::Reader;

constexpr uint32_t kSaveFlags = VIR_DOMAIN_SAVE_BYPASS_CACHE | VIR_DOMAIN_SAVE_RUNNING | VIR_DOMAIN_SAVE_PAUSED;
constexpr auto kPoll = std::chrono::milliseconds(20);

std::optional<Reply> bad_flags(const char* proc, uint32_t flags) {
    if ((flags & ~kSaveFlags) != 0) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("{}: unsupported flags ({:#x})", proc, flags & ~kSaveFlags));
    }
    if ((flags & VIR_DOMAIN_SAVE_RUNNING) != 0 && (flags & VIR_DOMAIN_SAVE_PAUSED) != 0) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("{}: --running and --paused are mutually exclusive", proc));
    }
    return std::nullopt;
}

// Whether the restored guest runs: as the flags say, else as it was when saved.
bool runs_after(uint32_t flags, bool saved_running) {
    if ((flags & VIR_DOMAIN_SAVE_RUNNING) != 0) return true;
    if ((flags & VIR_DOMAIN_SAVE_PAUSED) != 0) return false;
    return saved_running;
}

MigrationJob job_of(int operation) {
    MigrationJob job;
    job.operation = operation;
    job.active = true;
    return job;
}

struct Image {
    SaveImageHeader header;
    uint64_t offset = 0;  // where vmm's save starts
};

vmm::Result<Image> read_image(const std::string& path) {
    vmm::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return Error::from_errno(fmt::format("opening {}", path));
    std::vector<uint8_t> bytes(kSaveImagePrefix);
    if (::pread(fd.get(), bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
        return Error(fmt::format("{}: not a domain saved by vmmd (too short)", path));
    }
    auto length = decode_save_image_prefix(bytes);
    if (!length) return length.error().context(path);
    bytes.resize(kSaveImagePrefix + *length);
    ssize_t n = ::pread(fd.get(), bytes.data() + kSaveImagePrefix, *length, kSaveImagePrefix);
    if (n < 0) return Error::from_errno(fmt::format("reading {}", path));
    bytes.resize(kSaveImagePrefix + static_cast<size_t>(n));
    auto h = decode_save_image_header(bytes);
    if (!h) return h.error().context(path);
    return Image{std::move(*h), save_image_offset(*length)};
}

// A definition from a save image (or the --xml given for it), which always names its UUID.
vmm::Result<DomainDef> image_definition(const std::string& xml) {
    auto def = parse_domain_xml(xml, Uuid{});
    if (!def) return def.error();
    if (def->uuid == Uuid{}) return Error("the saved definition has no UUID");
    return def;
}

// --xml for a save or a restore: the same domain (name, UUID, memory, vCPUs), or refused.
vmm::Result<DomainDef> replacement(const DomainDef& saved, const std::string& xml) {
    auto def = image_definition(xml);
    if (!def) return def.error().context("--xml");
    if (def->uuid != saved.uuid || def->name != saved.name || def->memory_kib != saved.memory_kib || def->vcpus != saved.vcpus) {
        return Error(fmt::format("--xml describes another machine than the saved '{}' (its name, UUID, memory and vCPUs "
                                 "must stay)",
                                 saved.name));
    }
    return def;
}

}  // namespace

Status SaveImages::open() { return make_private_directory(managed_dir_); }

Status SaveImages::await(const Uuid& uuid, int operation) {
    for (;;) {
        auto q = sup_.qmp(uuid, "query-migrate");
        if (!q) return q.error();
        JobStats s = job_from_query_migrate(*q, operation);
        if (s.type == VIR_DOMAIN_JOB_COMPLETED) {
            (void)jobs_.complete(uuid, s);
            return {};
        }
        if (s.type == VIR_DOMAIN_JOB_FAILED) return Error(s.error.empty() ? "no reason recorded" : s.error);
        if (s.type == VIR_DOMAIN_JOB_CANCELLED) return Error("operation aborted: job canceled by client");
        std::this_thread::sleep_for(kPoll);
    }
}

Status SaveImages::write_image(const DomainView& v, const DomainDef& saved, const std::string& path, bool run_after) {
    const Uuid& uuid = v.def.uuid;
    if (v.state.state == VIR_DOMAIN_RUNNING) {
        if (auto s = sup_.suspend(uuid); !s) return s;
    }
    sup_.set_state(uuid, {VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_SAVE}, std::nullopt);
    auto header = encode_save_image_header({format_domain_xml(saved), run_after});
    std::filesystem::path target(path);
    std::string temp = (target.parent_path() / ("." + target.filename().string() + ".vmmd-XXXXXX")).string();
    vmm::UniqueFd fd(::mkostemp(temp.data(), O_CLOEXEC));
    if (!fd) return Error::from_errno(fmt::format("creating a file beside {}", path), errno, "is its directory there?");
    struct Removed {
        std::string file;
        bool keep = false;
        ~Removed() {
            if (!keep) ::unlink(file.c_str());
        }
    } removed{temp};
    if (::pwrite(fd.get(), header.data(), header.size(), 0) != static_cast<ssize_t>(header.size()) || ::fdatasync(fd.get()) != 0) {
        return Error::from_errno(fmt::format("writing {}", temp));
    }
    jobs_.set(uuid, job_of(VIR_DOMAIN_JOB_OPERATION_SAVE));
    auto asked = sup_.qmp(uuid, "migrate", Json{{"uri", fmt::format("file:{},offset={}", temp, header.size())}});
    Status done = asked ? await(uuid, VIR_DOMAIN_JOB_OPERATION_SAVE) : Status(asked.error());
    MigrationJob job = jobs_.get(uuid);
    job.active = false;
    jobs_.set(uuid, job);
    if (!done) return done;
    if (::rename(temp.c_str(), path.c_str()) != 0) return Error::from_errno(fmt::format("naming {} {}", temp, path));
    removed.keep = true;
    vmm::UniqueFd dir(::open(target.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir) (void)::fsync(dir.get());
    return {};
}

Reply SaveImages::save(const DomainView& v, const std::string& path, const std::optional<std::string>& dxml, uint32_t flags,
                       const char* proc) {
    if (auto bad = bad_flags(proc, flags)) return *bad;
    if (!v.active()) return not_running(v);
    auto saved = dxml ? replacement(v.def, *dxml) : vmm::Result<DomainDef>(v.def);
    if (!saved) return rpc::fail(VIR_ERR_XML_ERROR, saved.error().message());
    if (path.empty() || path.front() != '/') {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("{}: '{}' is not an absolute path on the host vmmd runs on", proc, path));
    }
    if (jobs_.get(v.def.uuid).active) {
        return rpc::fail(VIR_ERR_OPERATION_INVALID, fmt::format("domain '{}' has a job running (a migration or a save): "
                                                                "wait for it, or 'virsh domjobabort' it",
                                                                v.def.name));
    }
    bool was_running = v.state.state == VIR_DOMAIN_RUNNING;
    if (auto s = write_image(v, *saved, path, runs_after(flags, was_running)); !s) {
        // The guest goes on as it was: running again if it ran.
        if (was_running) (void)sup_.resume(v.def.uuid);
        else sup_.set_state(v.def.uuid, v.state, std::nullopt);
        return rpc::fail(VIR_ERR_OPERATION_FAILED, fmt::format("saving domain '{}' to {}: {}", v.def.name, path, s.error().message()));
    }
    if (auto s = sup_.end_saved(v.def.uuid); !s) {
        return rpc::fail(VIR_ERR_OPERATION_FAILED,
                         fmt::format("domain '{}' is saved in {}, but its vmm did not end: {}", v.def.name, path, s.error().message()));
    }
    (void)sup_.wait_stopped(v.def.uuid, Supervisor::kTermGrace);
    return rpc::ok();
}

Status SaveImages::load(const DomainDef& def, const std::string& path, uint64_t offset, bool run) {
    off_t log_from = log_size(sup_.log_path(def));  // where this vmm's lines will start
    if (auto s = sup_.start_restoring(def, fmt::format("file:{},offset={}", path, offset)); !s) return s;
    jobs_.set(def.uuid, job_of(VIR_DOMAIN_JOB_OPERATION_RESTORE));
    Status done = await(def.uuid, VIR_DOMAIN_JOB_OPERATION_RESTORE);
    MigrationJob job = jobs_.get(def.uuid);
    job.active = false;
    jobs_.set(def.uuid, job);
    if (!done) {
        // A vmm that refused the file has ended and said why in its log; one still there is ended.
        std::string why = sup_.wait_stopped(def.uuid, std::chrono::seconds(5)) ? last_log_line(sup_.log_path(def), log_from)
                                                                                : done.error().message();
        (void)sup_.end_failed(def.uuid);
        return Error(why);
    }
    if (!run) return {};
    if (auto s = sup_.resume(def.uuid); !s) return s;
    sup_.set_state(def.uuid, {VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_RESTORED}, std::nullopt);
    return {};
}

Reply SaveImages::restore(const std::string& path, const std::optional<std::string>& dxml, uint32_t flags, const char* proc) {
    if (auto bad = bad_flags(proc, flags)) return *bad;
    auto image = read_image(path);
    if (!image) return rpc::fail(VIR_ERR_OPERATION_FAILED, image.error().message());
    auto def = image_definition(image->header.xml);
    if (def && dxml) def = replacement(*def, *dxml);
    if (!def) return rpc::fail(VIR_ERR_XML_ERROR, fmt::format("{}: {}", path, def.error().message()));
    auto known = store_.by_uuid(def->uuid);
    if (known && known->active()) {
        return rpc::fail(VIR_ERR_OPERATION_INVALID, fmt::format("Requested operation is not valid: domain '{}' is already active",
                                                                def->name));
    }
    if (!known) {
        if (auto t = store_.add_transient(*def); !t) return rpc::fail(VIR_ERR_OPERATION_FAILED, t.error().message());
    }
    if (auto s = load(*def, path, image->offset, runs_after(flags, image->header.running)); !s) {
        if (auto v = store_.by_uuid(def->uuid); v && !v->active()) store_.set_stopped(def->uuid, v->state);  // forget a transient one
        return rpc::fail(VIR_ERR_OPERATION_FAILED, fmt::format("restoring domain '{}' from {}: {}", def->name, path, s.error().message()));
    }
    return rpc::ok();
}

std::optional<Reply> SaveImages::start_managed(const DomainDef& def, bool paused, bool force_boot) {
    std::string path = managed_path(def);
    if (::access(path.c_str(), F_OK) != 0) return std::nullopt;
    if (force_boot) {
        ::unlink(path.c_str());
        return std::nullopt;
    }
    auto image = read_image(path);
    if (!image) return rpc::fail(VIR_ERR_OPERATION_FAILED, image.error().message() + " ('virsh managedsave-remove' drops it)");
    auto saved = image_definition(image->header.xml);
    if (!saved || saved->uuid != def.uuid) {
        return rpc::fail(VIR_ERR_OPERATION_FAILED, fmt::format("{} holds another domain than '{}': 'virsh managedsave-remove' "
                                                               "drops it",
                                                               path, def.name));
    }
    if (auto s = load(*saved, path, image->offset, image->header.running && !paused); !s) {
        return rpc::fail(VIR_ERR_OPERATION_FAILED, fmt::format("restoring domain '{}' from its managed save {}: {}", def.name,
                                                               path, s.error().message()));
    }
    ::unlink(path.c_str());  // restored: the image has served, as libvirt removes it
    auto v = store_.by_uuid(def.uuid);
    if (!v) return no_domain(fmt::format("domain '{}' ended as it was restored", def.name));
    return domain_reply(*v);
}

bool SaveImages::has_managed(const DomainDef& def) const { return ::access(managed_path(def).c_str(), F_OK) == 0; }

Status SaveImages::undefining(const DomainDef& def, bool remove_it) {
    std::string path = managed_path(def);
    if (::access(path.c_str(), F_OK) != 0) return {};
    if (!remove_it) return Error("Refusing to undefine while domain managed save image exists");
    if (::unlink(path.c_str()) != 0) return Error::from_errno(fmt::format("removing {}", path));
    return {};
}

Reply SaveImages::dump_xml(const std::string& path, uint32_t flags) {
    if ((flags & ~uint32_t{VIR_DOMAIN_SAVE_IMAGE_XML_SECURE}) != 0) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("DOMAIN_SAVE_IMAGE_GET_XML_DESC: unsupported flags ({:#x})", flags));
    }
    auto image = read_image(path);
    if (!image) return rpc::fail(VIR_ERR_OPERATION_FAILED, image.error().message());
    return rpc::ok_string(image->header.xml);
}

std::vector<rpc::Procedure> SaveImages::procedures() {
    auto string_then = [](Reader& a, const char* proc, auto f) -> Reply {
        auto text = a.string(rpc::kMaxString);
        if (!text) return undecodable(proc);
        return f(*text);
    };
    return {
        {Proc::DOMAIN_SAVE, Access::write, on_domain(store_, "DOMAIN_SAVE", [this, string_then](const DomainView& v, Reader& a) {
             return string_then(a, "DOMAIN_SAVE", [&](const std::string& to) { return save(v, to, std::nullopt, 0, "DOMAIN_SAVE"); });
         })},
        {Proc::DOMAIN_SAVE_FLAGS, Access::write, on_domain(store_, "DOMAIN_SAVE_FLAGS", [this](const DomainView& v, Reader& a) {
             auto to = a.string(rpc::kMaxString);
             auto dxml = a.optional_string(rpc::kMaxString);
             auto flags = a.u32();
             if (!to || !dxml || !flags) return undecodable("DOMAIN_SAVE_FLAGS");
             return save(v, *to, *dxml, *flags, "DOMAIN_SAVE_FLAGS");
         })},
        {Proc::DOMAIN_RESTORE, Access::write, [this, string_then](Caller&, Reader& a) {
             return string_then(a, "DOMAIN_RESTORE",
                                [&](const std::string& from) { return restore(from, std::nullopt, 0, "DOMAIN_RESTORE"); });
         }},
        {Proc::DOMAIN_RESTORE_FLAGS, Access::write, [this](Caller&, Reader& a) {
             auto from = a.string(rpc::kMaxString);
             auto dxml = a.optional_string(rpc::kMaxString);
             auto flags = a.u32();
             if (!from || !dxml || !flags) return undecodable("DOMAIN_RESTORE_FLAGS");
             return restore(*from, *dxml, *flags, "DOMAIN_RESTORE_FLAGS");
         }},
        {Proc::DOMAIN_MANAGED_SAVE, Access::write, flagged(store_, "DOMAIN_MANAGED_SAVE", [this](const DomainView& v, uint32_t f) {
             if (!v.persistent) {
                 return rpc::fail(VIR_ERR_OPERATION_INVALID, "Requested operation is not valid: cannot do managed save for "
                                                             "transient domain");
             }
             return save(v, managed_path(v.def), std::nullopt, f, "DOMAIN_MANAGED_SAVE");
         })},
        {Proc::DOMAIN_HAS_MANAGED_SAVE_IMAGE, Access::read_only,
         flagged(store_, "DOMAIN_HAS_MANAGED_SAVE_IMAGE",
                 [this](const DomainView& v, uint32_t) { return rpc::ok_i32(has_managed(v.def) ? 1 : 0); })},
        {Proc::DOMAIN_MANAGED_SAVE_REMOVE, Access::write,
         flagged(store_, "DOMAIN_MANAGED_SAVE_REMOVE", [this](const DomainView& v, uint32_t) {
             if (::unlink(managed_path(v.def).c_str()) != 0 && errno != ENOENT) {
                 return rpc::fail(VIR_ERR_OPERATION_FAILED, Error::from_errno("removing " + managed_path(v.def)).message());
             }
             return rpc::ok();
         })},
        // Write access: it reads a file of the client's choosing with vmmd's rights.
        {Proc::DOMAIN_SAVE_IMAGE_GET_XML_DESC, Access::write, [this](Caller&, Reader& a) {
             auto file = a.string(rpc::kMaxString);
             auto flags = a.u32();
             if (!file || !flags) return undecodable("DOMAIN_SAVE_IMAGE_GET_XML_DESC");
             return dump_xml(*file, *flags);
         }},
    };
}

}  // namespace vmmd

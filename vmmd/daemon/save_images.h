// SaveImages: virsh save, restore, managedsave and save-image-dumpxml, as libvirt's QEMU driver
// serves them, on vmm's saves (migrate file:, --incoming file:). A save pauses the guest, writes
// vmmd's header (vmmd/domain/save_image.h) to a temporary file beside the target, has the vmm
// save the guest after it, renames the file, and ends the vmm ("shut off (saved)"); a restore
// starts a vmm on the file's definition that loads the guest from it, and runs it if it ran
// when saved (or as --running / --paused say). A managed save is a save to
// <state>/save/NAME.save that the domain's next start restores (and then removes). The job is a
// migration job (domjobinfo shows it, domjobabort cancels it), in the migrations' JobTable.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "vmmd/domain/domain_store.h"
#include "vmmd/migration/job_table.h"
#include "vmmd/rpc/dispatch.h"
#include "vmmd/runtime/supervisor.h"

namespace vmmd {

class SaveImages {
public:
    SaveImages(DomainStore& store, Supervisor& sup, JobTable& jobs, std::string managed_dir)
        : store_(store), sup_(sup), jobs_(jobs), managed_dir_(std::move(managed_dir)) {}
    // Makes the managed saves' directory (the guests' memory: root's alone).
    vmm::Status open();
    std::vector<rpc::Procedure> procedures();

    // The domain's start (DOMAIN_CREATE): with a managed save image, restores it instead of a
    // boot (nullopt: there is none, boot it); `force_boot` removes the image and boots.
    std::optional<rpc::Reply> start_managed(const DomainDef& def, bool paused, bool force_boot);
    bool has_managed(const DomainDef& def) const;
    // Before an undefine: refused while a managed save image exists, unless `remove_it`.
    vmm::Status undefining(const DomainDef& def, bool remove_it);

private:
    std::string managed_path(const DomainDef& def) const { return managed_dir_ + "/" + def.name + ".save"; }
    rpc::Reply save(const DomainView& v, const std::string& path, const std::optional<std::string>& dxml, uint32_t flags,
                    const char* proc);
    // Pauses the guest and writes the image (`saved` its definition) under a temporary name,
    // then names it `path`.
    vmm::Status write_image(const DomainView& v, const DomainDef& saved, const std::string& path, bool run_after);
    rpc::Reply restore(const std::string& path, const std::optional<std::string>& dxml, uint32_t flags, const char* proc);
    // Starts the vmm that loads `path` for `def` and waits for it; then runs it or not.
    vmm::Status load(const DomainDef& def, const std::string& path, uint64_t offset, bool run);
    // Polls the vmm's query-migrate until its save or load ends.
    vmm::Status await(const Uuid& uuid, int operation);
    rpc::Reply dump_xml(const std::string& path, uint32_t flags);

    DomainStore& store_;
    Supervisor& sup_;
    JobTable& jobs_;
    std::string managed_dir_;
};

}  // namespace vmmd

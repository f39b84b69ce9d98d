// FileRestore (destination_file.h).
#include "vmm/migration/session/destination_file.h"

#include <fmt/format.h>

#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"

namespace vmm::migration {

FileRestore::~FileRestore() {
    if (check_cancel_) check_cancel_->cancel();
    if (checker_.joinable()) checker_.join();
}

bool FileRestore::report(MigrationStats& s) const {
    if (!lazy_) return false;
    s.postcopy = lazy_->stats();
    s.postcopy.ready_ms = lazy_ready_ms_;
    return true;
}

Status FileRestore::map(FileRam ram) {
    const auto& blocks = core_.machine.memory().blocks();
    if (ram.offsets.size() != blocks.size()) return Error("internal: a mapped file without a place for every RAM block");
    // Guarded first: a file that could change under the guest is not mapped.
    auto guard = MappedFileGuard::create(core_.machine, ram.fd, core_.uri.text, core_.on_failure);
    if (!guard) {
        return guard.error().context("x-restore-mapped cannot keep the guest from seeing the file change (restore it "
                                     "without x-restore-mapped: it is then read)");
    }
    guard_ = std::move(*guard);
    for (size_t i = 0; i < blocks.size(); ++i)
        if (auto s = blocks[i]->map_file(ram.fd, ram.offsets[i]); !s) return s;
    auto token = stream::CancelToken::create();
    if (!token) return token.error();
    check_cancel_.emplace(std::move(*token));
    checker_ = std::thread([this, check = std::move(ram.check)] {
        name_this_thread("restore-check");
        Status s = check(*check_cancel_);
        if (s) {
            guard_->check_done();
            log::info("every page of {} matches its sum", core_.uri.text);
        } else if (!check_cancel_->cancelled()) {
            core_.on_failure(Error(fmt::format("the guest runs on RAM mapped from {}, whose check found it damaged: {}",
                                               core_.uri.text, s.error().message())));
        }
    });
    return {};
}

Status FileRestore::receive_lazy(stream::ByteStream& st, const std::vector<BlockInfo>& blocks, LazyFileRam file,
                                 const std::function<Status()>& ready_and_go) {
    machine::Machine& m = core_.machine;
    auto read_all = file.read_all;
    auto lazy = std::make_unique<LazyRestore>(m.memory(), blocks, m.vcpus().tids(), std::move(file), core_.cancel);
    if (auto s = lazy->prepare(); !s) {  // e.g. no userfaultfd for this process: read it all, then run
        lazy.reset();
        log::info("{}: read before the guest runs, not lazily: {}", core_.uri.text, s.error().message());
        if (auto r = read_all(); !r) {
            DestinationCore::refuse(st, r.error());
            return r;
        }
        return ready_and_go();
    }
    LazyRestore* l = lazy.get();
    {
        std::lock_guard lock(core_.mutex);
        lazy_ = std::move(lazy);  // kept for its figures
    }
    m.control().postcopy_window(true);  // the guest's own view of its stalls from here
    if (auto s = ready_and_go(); !s) {
        m.control().postcopy_window(false);
        return s;
    }
    {
        std::lock_guard lock(core_.mutex);
        lazy_ready_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - core_.start).count();
    }
    m.run().set_incomplete("the guest runs on a lazy restore whose pages are still coming in from the file");
    core_.set_status(MigrationStatus::postcopy_active);
    Status s = l->run();
    if (s) {
        l->close();
        m.control().postcopy_window(false);
        m.run().set_incomplete("");
        log::info("{}: every page is in (lazy restore)", core_.uri.text);
    }
    return s;
}

}  // namespace vmm::migration

#include "control_buffers.h"

#include <sys/mman.h>

#include <cstring>
#include <mutex>

namespace rdma_migrate {

namespace {

struct Spare {
    std::mutex mutex;
    std::unique_ptr<ControlBuffers> set;
};

// Never destroyed: a session that ends while the process exits may still give its set back.
Spare& spare() {
    static auto* s = new Spare;
    return *s;
}

}  // namespace

Result<std::unique_ptr<ControlBuffers>> ControlBuffers::make() {
    // MAP_POPULATE: the kernel faults every page in at once, not one exception a page.
    auto map = vmm::Mapping::map("the RDMA control buffers", kCount * kControlBufferSize, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE);
    if (!map) return map.error();
    return std::unique_ptr<ControlBuffers>(new ControlBuffers(std::move(*map)));
}

Result<std::unique_ptr<ControlBuffers>> ControlBuffers::take() {
    {
        std::lock_guard lock(spare().mutex);
        if (spare().set) return std::move(spare().set);
    }
    return make();
}

void ControlBuffers::give_back(std::unique_ptr<ControlBuffers> set) noexcept {
    if (!set) return;
    std::memset(set->map_.data(), 0, set->map_.size());  // nothing of this migration reaches the next
    keep(std::move(set));
}

void ControlBuffers::make_spare() noexcept {
    {
        std::lock_guard lock(spare().mutex);
        if (spare().set) return;
    }
    auto made = make();  // outside the lock: a connection may take the spare meanwhile
    if (made) keep(std::move(*made));  // else said again, with its reason, by the connection that needs one
}

void ControlBuffers::keep(std::unique_ptr<ControlBuffers> set) noexcept {
    std::lock_guard lock(spare().mutex);
    if (!spare().set) spare().set = std::move(set);  // else it goes: one spare at most
}

}  // namespace rdma_migrate

#include "vmm/common/mapping.h"

#include <string>

namespace vmm {

Result<Mapping> Mapping::map(const char* what, size_t size, int prot, int flags, int fd,
                             off_t offset) {
    void* p = ::mmap(nullptr, size, prot, flags, fd, offset);
    if (p == MAP_FAILED) {
        return Error::from_errno(std::string("mmap ") + what + " (" + std::to_string(size) +
                                 " bytes)");
    }
    return Mapping(p, size);
}

}  // namespace vmm

#include "vmm/common/result.h"

#include <cstring>

namespace vmm {

Error Error::from_errno(std::string_view what, int err, std::string_view hint) {
    std::string m(what);
    m += ": ";
    m += std::strerror(err);
    if (!hint.empty()) {
        m += "; ";
        m += hint;
    }
    Error e(std::move(m));
    e.errno_ = err;
    return e;
}

Error Error::with_errno(std::string message, int err) {
    Error e(std::move(message));
    e.errno_ = err;
    return e;
}

Error Error::context(std::string_view where) const {
    std::string m(where);
    m += ": ";
    m += message_;
    Error e(std::move(m));
    e.errno_ = errno_;
    return e;
}

}  // namespace vmm

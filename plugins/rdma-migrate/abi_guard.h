// The plugin's C boundary (plugin.cc, plugin_pull.cc): no exception crosses it; a failure is
// its one line in vmm_err and -1.
#pragma once

#include <cstdio>
#include <exception>
#include <string>

#include "vmm/common/result.h"
#include "vmm/plugin_abi.h"

namespace rdma_migrate {

inline int fail(vmm_err* e, const std::string& text) {
    std::snprintf(e->text, sizeof(e->text), "%s", text.c_str());
    return -1;
}

template <typename F>
int guarded(vmm_err* e, F f) {
    try {
        vmm::Status s = f();
        return s ? 0 : fail(e, s.error().message());
    } catch (const std::exception& x) {
        return fail(e, std::string("rdma transport: ") + x.what());
    } catch (...) {
        return fail(e, "rdma transport: unexpected failure");
    }
}

}  // namespace rdma_migrate

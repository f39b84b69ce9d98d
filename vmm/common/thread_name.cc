#include "vmm/common/thread_name.h"

#include <pthread.h>

#include <algorithm>

namespace vmm {

void name_this_thread(std::string_view name) {
    std::string cut(name.substr(0, std::min(name.size(), kThreadNameMax)));
    ::pthread_setname_np(::pthread_self(), cut.c_str());
}

std::string this_thread_name() {
    char buf[kThreadNameMax + 1] = {};
    if (::pthread_getname_np(::pthread_self(), buf, sizeof(buf)) != 0) return {};
    return buf;
}

}  // namespace vmm

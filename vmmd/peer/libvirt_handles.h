// Owning handles for what libvirt's client library hands out: connections, domains and
// typed-parameter lists, each released by its libvirt call when the handle goes.
#pragma once

#include <libvirt/libvirt.h>

#include <memory>

namespace vmmd::peer {

struct CloseConnection {
    void operator()(virConnectPtr c) const { virConnectClose(c); }
};
struct FreeDomain {
    void operator()(virDomainPtr d) const { virDomainFree(d); }
};
using Connection = std::unique_ptr<virConnect, CloseConnection>;
using Domain = std::unique_ptr<virDomain, FreeDomain>;

// A typed-parameter list that libvirt allocates (virDomainGetJobStats) or grows
// (virTypedParamsAdd*: pass &list, &count, &max).
struct TypedParams {
    virTypedParameterPtr list = nullptr;
    int count = 0;
    int max = 0;
    TypedParams() = default;
    TypedParams(const TypedParams&) = delete;
    TypedParams& operator=(const TypedParams&) = delete;
    ~TypedParams() { virTypedParamsFree(list, count); }
};

}  // namespace vmmd::peer

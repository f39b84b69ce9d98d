// The one include of <linux/kvm.h> for C++ code.
//
// linux-libc-dev 6.1 (Debian 12) declares flexible arrays with __DECLARE_FLEX_ARRAY, which wraps
// them in a struct holding an empty struct. In C++ an empty struct has size 1, so
// sizeof(kvm_cpuid2) becomes 12 instead of 8: the ioctl numbers that encode the size
// (KVM_GET_SUPPORTED_CPUID, KVM_SET_CPUID2, KVM_GET_MSRS, ...) are wrong and the arrays sit at
// the wrong offsets. Declare them as plain flexible arrays (a GNU extension in C++) instead.
#pragma once

#include <linux/stddef.h>

#undef __DECLARE_FLEX_ARRAY
#define __DECLARE_FLEX_ARRAY(TYPE, NAME) TYPE NAME[]

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include <linux/kvm.h>
#pragma GCC diagnostic pop

#include <cstddef>

static_assert(sizeof(kvm_cpuid2) == 8, "kvm_cpuid2 must have the C layout");
static_assert(offsetof(kvm_cpuid2, entries) == 8, "kvm_cpuid2 must have the C layout");
static_assert(offsetof(kvm_msrs, entries) == 8, "kvm_msrs must have the C layout");
static_assert(offsetof(kvm_msr_list, indices) == 4, "kvm_msr_list must have the C layout");
static_assert(sizeof(kvm_xsave) == 4096, "kvm_xsave must have the C layout");

#!/bin/sh
# Runs inside the nested VM, in the host's root filesystem: brings up SoftRoCE (rdma_rxe on a
# dummy netdev) and /dev/kvm (nested SVM), then runs the command softroce-run.sh was given, in
# the directory it was given in. The rxe device's address is in $VMM_RDMA_ADDR.
set -u
say() { echo "softroce: $*"; }
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
# rxe needs the crc32 crypto algorithm; the kernel cannot autoload it (its modprobe helper runs
# in the initramfs, which has no such module), so load it here.
modprobe crc32_generic; modprobe crc32_pclmul 2>/dev/null
# Likewise ss's sources: without unix_diag, ss reads /proc/net/unix, which has no queue lengths or
# peers (every Recv-Q reads 0: a test that waits for a queued call would wait for ever).
for m in unix_diag inet_diag tcp_diag; do modprobe "$m" || say "modprobe $m failed: ss shows less"; done
# The kernel's TLS (x-tls-kernel, label ktls) and the AES-GCM it encrypts with: neither can be
# autoloaded here either (AES-NI's module where the emulated CPU has it, the generic one else).
modprobe tls || say "modprobe tls failed: the ktls tests will skip"
for m in aes_generic gcm ghash_generic; do modprobe "$m" || say "modprobe $m failed: the ktls tests will skip"; done
modprobe aesni_intel 2>/dev/null; modprobe ghash_clmulni_intel 2>/dev/null
modprobe rdma_rxe && modprobe rdma_ucm && modprobe ib_uverbs || { say "cannot load the RDMA modules"; exit 124; }
modprobe dummy numdummies=0
ip link set lo up
ip link add dummy0 type dummy
ip addr add 10.99.0.1/24 dev dummy0
# An IPv6 address too (nodad: usable at once), for the RDMA-CM tests over IPv6.
ip -6 addr add fd99::1/64 dev dummy0 nodad 2>/dev/null || say "no IPv6 on dummy0 (the IPv6 test will skip)"
ip link set dummy0 up
rdma link add rxe0 type rxe netdev dummy0 || { say "cannot create the rxe device"; exit 124; }
export VMM_RDMA_ADDR=10.99.0.1 VMM_RDMA_DEVICE=rxe0
ip -6 addr show dev dummy0 | grep -q fd99::1 && export VMM_RDMA_ADDR6=fd99::1
modprobe kvm_amd 2>/dev/null || modprobe kvm_intel 2>/dev/null || say "no nested KVM (kvm tests will skip)"
# The ring's exactness test needs a stock KVM, which this is.
export VMM_TEST_DIRTY_RING=1
# KVM here is nested under TCG: a guest's step and every copy cost far more than under KVM on a
# host, so the tests and the demo size their guests' work down (tests/support/kvm_fixture.h).
export VMM_NESTED_TCG=1
# Its RDMA devices are the tests' to add and remove (a test unplugs one of its own mid-migration).
export VMM_RDMA_HOTPLUG=1
# The build tree the host ran with (mounted at the same path): what scripts/lib/common.sh reads,
# so a benchmark re-run in here uses the binaries that were just built, not $ROOT/build.
export VMM_BUILD_DIR="$VMM_BUILD"
say "rxe0 on dummy0 at $VMM_RDMA_ADDR; /dev/kvm: $([ -e /dev/kvm ] && echo yes || echo no); running: $(cat "$VMM_SOFTROCE_DIR/command.txt")"
cd "$(cat "$VMM_SOFTROCE_DIR/cwd.txt")" || exit 123
sh "$VMM_SOFTROCE_DIR/command.sh"

# Shared by the scripts: install what is missing (Debian packages only), configure, build.
# Source it; it defines functions and sets ROOT and BUILD.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${VMM_BUILD_DIR:-$ROOT/build}"

# What each job needs (docs/dependencies.md says why each is there). The demo installs only the
# core; the tests install everything.
VMM_CORE_PACKAGES=(build-essential cmake ninja-build pkg-config libtomlplusplus-dev libcli11-dev libfmt-dev libgnutls28-dev nettle-dev
                   nlohmann-json3-dev libxxhash-dev)
VMM_RDMA_PACKAGES=(librdmacm-dev libibverbs-dev)
VMM_VIRSH_PACKAGES=(libvirt-dev libxml2-dev libvirt-clients)
VMM_PACKAGES=("${VMM_CORE_PACKAGES[@]}" "${VMM_RDMA_PACKAGES[@]}" "${VMM_VIRSH_PACKAGES[@]}"
              libgtest-dev qemu-system-x86 clang libclang-rt-14-dev jq python3-libvirt gnutls-bin
              golang-go golang-github-digitalocean-go-libvirt-dev tshark libvirt-wireshark virtinst
              virt-manager xvfb xauth dbus at-spi2-core python3-pyatspi file)
# The SoftRoCE nested VM's (scripts/softroce-run.sh): QEMU, Debian's kernel and what runs inside.
VMM_NESTED_PACKAGES=(qemu-system-x86 linux-image-amd64 busybox-static kmod cpio rdma-core ibverbs-providers
                     ibverbs-utils rdmacm-utils perftest iproute2)

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

missing_packages() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"
    done
}

# ensure_packages PKG...: apt-get installs the ones not installed yet. Callers that run side by
# side (the nested VMs' shards, a demo beside the tests) take turns on one lock and look again
# once they hold it; an apt or dpkg lock held by anything else (unattended-upgrades, a person's
# apt-get) is waited for, up to VMM_APT_WAIT seconds (default 900), instead of failing.
ensure_packages() {
    local missing
    missing=$(missing_packages "$@")
    [ -z "$missing" ] && return 0
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    local wait_s=${VMM_APT_WAIT:-900} lock=${VMM_APT_LOCK:-/tmp/vmm-apt.lock} apt_lock_fd
    exec {apt_lock_fd}>>"$lock"
    flock -w "$wait_s" "$apt_lock_fd" || die "another vmm script held the package lock ($lock) for ${wait_s}s"
    missing=$(missing_packages "$@")  # what the one before us installed is there now
    if [ -n "$missing" ]; then
        log "installing: $(echo $missing)"
        apt_waiting "$wait_s" $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq ||
            die "apt-get update failed: check the package mirror configuration"
        # shellcheck disable=SC2086
        apt_waiting "$wait_s" $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing ||
            die "apt-get install failed for: $(echo $missing)"
        missing=$(missing_packages "$@")
        [ -z "$missing" ] || die "apt-get install left these uninstalled: $(echo $missing)"
    fi
    exec {apt_lock_fd}>&-
}

# apt_waiting SECONDS COMMAND...: runs the apt command; while it fails because another process
# holds apt's or dpkg's lock, waits and runs it again, for SECONDS at most. Its output is shown
# only when it fails for another reason.
apt_waiting() {
    local until=$(( $(date +%s) + $1 )) out rc said=0
    shift
    while :; do
        rc=0
        out=$("$@" -o DPkg::Lock::Timeout=60 2>&1) || rc=$?
        [ "$rc" = 0 ] && return 0
        if grep -qE 'Could not get lock|Unable to acquire the dpkg frontend lock|Unable to lock directory' <<<"$out" &&
           [ "$(date +%s)" -lt "$until" ]; then
            [ "$said" = 1 ] || log "another process holds apt's lock: waiting for it ($(grep -m1 -oE 'held by process [0-9]+[^)]*' <<<"$out" || echo "apt"))"
            said=1
            sleep "${VMM_APT_RETRY_S:-5}"
            continue
        fi
        grep -vE '^(debconf|dpkg-preconfigure): ' <<<"$out" | tail -20 >&2
        return "$rc"
    done
}

# configure: the build tree's first configuration (Ninja where it is installed; warnings are
# errors under CI). A tree configured before keeps its generator and options.
configure() {
    local werror=OFF opts=()
    [ -n "${CI:-}" ] && werror=ON
    if [ ! -e "$BUILD/CMakeCache.txt" ]; then
        command -v ninja >/dev/null && opts=(-G Ninja)
        # Only here: a tree configured before keeps its own (a benchmark run without CI must not
        # turn off the -Werror a CI-configured tree was built with).
        opts+=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DVMM_WERROR="$werror")
        log "configuring in $BUILD"
    elif [ -n "${CI:-}" ]; then
        opts=(-DVMM_WERROR=ON)  # under CI warnings are errors, whatever the tree had
    fi
    mkdir -p "$BUILD"
    cmake -S "$ROOT" -B "$BUILD" "${opts[@]}" \
        >"$BUILD/configure.log" 2>&1 || { tail -30 "$BUILD/configure.log" >&2; die "cmake configuration failed (log: $BUILD/configure.log)"; }
}

# build_progress: reads the build tool's output and shows which step of how many it is at (the
# file being compiled), one line rewritten on a terminal, a line every tenth of the way elsewhere.
build_progress() {
    local tty=0
    [ -t 2 ] && tty=1
    awk -v tty="$tty" '
        function show(n, m, what,   pct) {
            pct = m ? int(100 * n / m) : 0
            if (tty) { printf "\r\033[K    [%d/%d] %s", n, m, what > "/dev/stderr"; fflush("/dev/stderr") }
            else if (pct >= next_pct) { printf "    [%d/%d] %d%% %s\n", n, m, pct, what > "/dev/stderr"; fflush("/dev/stderr"); next_pct = pct - pct % 10 + 10 }
        }
        { print; fflush() }
        function step(what,   t) {  # "Building CXX object dir/CMakeFiles/t.dir/x.cc.o" -> "dir/x.cc"
            sub(/^Building (CXX|C|ASM) object /, "", what)
            if (match(what, /CMakeFiles\/[^\/]*\.dir\/Unity\/unity_[0-9]+/)) {  # a unity batch: its target
                t = substr(what, RSTART + 11, RLENGTH - 11); sub(/\.dir\/Unity\/unity_/, " (unity batch ", t)
                return substr(what, 1, RSTART - 1) t ")"
            }
            sub(/CMakeFiles\/[^\/]*\.dir\//, "", what)
            sub(/\.o$/, "", what); return what
        }
        match($0, /^\[[0-9]+\/[0-9]+\] /) {                       # ninja: [n/m] Building CXX object dir/x.cc.o
            split(substr($0, 2, RLENGTH - 3), nm, "/"); show(nm[1], nm[2], step(substr($0, RLENGTH + 1)))
        }
        match($0, /^\[ *[0-9]+%\] /) {                             # make: [ 45%] Building CXX object ...
            show(substr($0, 2, RLENGTH - 3) + 0, 100, step(substr($0, RLENGTH + 1)))
        }
        END { if (tty) printf "\r\033[K" > "/dev/stderr" }' >"$BUILD/build.log"
}

# build_targets [TARGET...]: builds those targets (all without any), showing progress; on failure
# shows the errors and where the whole log is.
build_targets() {
    local args=() t
    for t in "$@"; do args+=(--target "$t"); done
    # stdbuf: ninja writes its progress through stdio, which a pipe would hold back in 4 KiB blocks.
    { stdbuf -oL cmake --build "$BUILD" -j"$(nproc)" "${args[@]}" 2>&1; echo $? >"$BUILD/build.rc"; } | build_progress
    if [ "$(cat "$BUILD/build.rc")" != 0 ]; then
        grep -E "error|Error" "$BUILD/build.log" | head -40 >&2
        die "the build failed (full log: $BUILD/build.log)"
    fi
}

# build: every package, configure, and build everything (the tests' build).
build() {
    build_only VMM_PACKAGES
    [ -x "$BUILD/bin/vmm" ] || die "the build did not produce $BUILD/bin/vmm"
}

# build_only PACKAGES-ARRAY-NAME [TARGET...]: those packages, then those targets (all without any).
build_only() {
    local -n wanted_packages_=$1  # a name no caller's array has: "pkgs" there made it circular (nothing installed)
    shift
    ensure_packages "${wanted_packages_[@]}"
    configure
    if [ $# -gt 0 ]; then log "building $(echo "$@" | sed 's/ /, /g')"; else log "building everything"; fi
    build_targets "$@"
}

# run_nested_if NEEDED WHY SCRIPT ARGS...: when NEEDED is 1, says WHY and runs SCRIPT with ARGS in
# the nested VM (with VMM_DEMO_INSIDE=1) instead of here; the demos' hop where the host lacks
# what they need.
run_nested_if() {
    [ "$1" = 1 ] || return 0
    log "$2"
    shift 2
    exec "$ROOT/scripts/softroce-run.sh" env VMM_DEMO_INSIDE=1 VMM_BUILD_DIR="$BUILD" bash "$@"
}

NESTED_KVM_WHY="the demo runs inside the nested VM, which has KVM of its own (nested, under TCG: a smaller guest)"

# kvm_usable: /dev/kvm can be opened for reading and writing here (VMM_NO_KVM=1 says no, as on a
# machine without it; scripts/test.sh and scripts/demo.sh then hide /dev/kvm from everything they run).
kvm_usable() {
    [ -z "${VMM_NO_KVM:-}" ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]
}

# kernel_tls_usable: whether this kernel has TLS (x-tls-kernel; the tests labelled ktls), loading
# its module if it can.
kernel_tls_usable() {
    [ -d /sys/module/tls ] || modprobe -q tls 2>/dev/null || true
    [ -d /sys/module/tls ]
}

# sample_overhead PID RAM_KIB OUTFILE [INTERVAL_MS]: the largest resident memory PID holds beyond
# its guest RAM (every mapping but those of the RAM block's size), in KiB, written to OUTFILE
# while PID lives or until this sampler is killed. One process (tools/mem_watch.cc), so that
# sampling does not take the CPU from the migration it watches.
sample_overhead() {
    exec "$BUILD/bin/vmm-memwatch" "$1" "$2" "$3" "${4:-50}"
}

# isolated ERR-FILE COMMAND...: COMMAND in a subshell of its own, its stderr in ERR-FILE, so that a
# `die` inside ends it alone (a benchmark's one mode or run); the processes it recorded in
# `pids` are killed when it ends. Returns COMMAND's status.
isolated() {
    local err=$1
    shift
    ( pids=(); trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done' EXIT; "$@" ) 2>"$err"
}

median() { sort -g | awk '{a[NR]=$1} END{if (NR == 0) print "-"; else print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }  # of numbers on stdin; "-" for none

# hide_kvm_if_asked SCRIPT ARGS...: with VMM_NO_KVM=1 on a machine that has /dev/kvm, runs SCRIPT
# again in a private mount namespace where /dev/kvm is an empty read-only file, so that it and
# everything it starts (vmm, the tests) take the path of a machine without KVM. Needs root.
hide_kvm_if_asked() {
    [ -n "${VMM_NO_KVM:-}" ] && [ -z "${VMM_KVM_HIDDEN:-}" ] && [ -e /dev/kvm ] || return 0
    [ "$(id -u)" = 0 ] || die "VMM_NO_KVM=1 hides /dev/kvm in a private mount namespace, which needs root"
    exec unshare --mount --propagation private env VMM_KVM_HIDDEN=1 bash -c '
        empty=$(mktemp /tmp/vmm-no-kvm.XXXXXX)
        mount --bind "$empty" /dev/kvm && mount -o remount,bind,ro /dev/kvm ||
            { echo "error: cannot hide /dev/kvm (mount --bind)" >&2; exit 1; }
        exec bash "$@"' bash "$@"
}

# why_no_kvm: one line saying why /dev/kvm cannot be used here.
why_no_kvm() {
    if [ -n "${VMM_NO_KVM:-}" ]; then echo "VMM_NO_KVM=1 hides /dev/kvm"
    elif [ ! -e /dev/kvm ]; then echo "this machine has no /dev/kvm"
    else echo "/dev/kvm cannot be opened for reading and writing"; fi
}

# Phase timing (scripts/test.sh, scripts/check-fresh.sh): phase_done NAME gives NAME the seconds
# since the last mark; phase_add NAME SECONDS one measured elsewhere; print_phases LABEL prints
# "LABEL: name m:ss, ..., total m:ss" from the first mark (when common.sh was sourced).
phases=() phase_t0=$(date +%s) phase_mark=$phase_t0
mmss() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }
phase_add() { phases+=("$1 $2"); }
phase_done() {
    local now
    now=$(date +%s)
    phase_add "$1" $((now - phase_mark))
    phase_mark=$now
}
print_phases() {
    local p
    printf '%s:' "$1"
    for p in "${phases[@]}"; do printf ' %s %s,' "${p% *}" "$(mmss "${p##* }")"; done
    printf ' total %s\n' "$(mmss $(( $(date +%s) - phase_t0 )))"
}

# wait_for_monitor PID SOCKET LOG: waits until the vmm PID listens on its monitor SOCKET; if it
# ends first, shows its own error (from LOG) and stops.
wait_for_monitor() {
    local pid=$1 sock=$2 logf=$3 _
    for _ in $(seq 300); do
        [ -S "$sock" ] && return 0
        if ! kill -0 "$pid" 2>/dev/null; then
            sed 's/^/    | /' "$logf" >&2
            die "vmm did not start: $(grep -v '^\s*$' "$logf" | tail -1)"
        fi
        sleep 0.1
    done
    die "vmm did not open its monitor ($sock) within 30 s: its log is $logf"
}

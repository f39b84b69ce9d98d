# Shared by the scripts: install what is missing (Debian packages only), configure, build.
# Source it; it defines functions and sets ROOT and BUILD.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${VMM_BUILD_DIR:-$ROOT/build}"

# What the build and the host tests need (docs/dependencies.md says why each is there).
VMM_PACKAGES=(build-essential cmake pkg-config libtomlplusplus-dev libcli11-dev libfmt-dev
              nlohmann-json3-dev libxxhash-dev libgtest-dev qemu-system-x86 clang libclang-rt-14-dev
              librdmacm-dev libibverbs-dev jq libvirt-dev libxml2-dev libvirt-clients python3-libvirt)

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

missing_packages() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"
    done
}

# ensure_packages PKG...: apt-get installs the ones not installed yet.
ensure_packages() {
    local missing
    missing=$(missing_packages "$@")
    [ -z "$missing" ] && return 0
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    log "installing: $(echo $missing)"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null ||
        die "apt-get update failed: check the package mirror configuration"
    # shellcheck disable=SC2086
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
        die "apt-get install failed for: $(echo $missing)"
}

# build: configure (warnings are errors under CI) and build everything.
build() {
    ensure_packages "${VMM_PACKAGES[@]}"
    local werror=OFF
    [ -n "${CI:-}" ] && werror=ON
    log "configuring in $BUILD"
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVMM_WERROR="$werror" >/dev/null ||
        die "cmake configuration failed"
    log "building"
    if ! cmake --build "$BUILD" -j"$(nproc)" >"$BUILD/build.log" 2>&1; then
        grep -E "error|Error" "$BUILD/build.log" | head -40 >&2
        die "the build failed (full log: $BUILD/build.log)"
    fi
    [ -x "$BUILD/bin/vmm" ] || die "the build did not produce $BUILD/bin/vmm"
}

# sample_overhead PID RAM_KIB OUTFILE [INTERVAL_MS]: the largest resident memory PID holds beyond
# its guest RAM (every mapping but those of the RAM block's size), in KiB, written to OUTFILE
# while PID lives or until this sampler is killed. One process (tools/mem_watch.cc), so that
# sampling does not take the CPU from the migration it watches.
sample_overhead() {
    exec "$BUILD/bin/vmm-memwatch" "$1" "$2" "$3" "${4:-50}"
}

median() { sort -g | awk '{a[NR]=$1} END{print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }  # of numbers on stdin

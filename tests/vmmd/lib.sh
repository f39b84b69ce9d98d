# Shared by the virsh tests: start_vmmd BUILD_DIR [ARGS] (sets dir, sock, uri, pid; stops vmmd, ends
# the vmm processes it started, and removes the directory on exit), stop_vmmd, fail, expect,
# wait_until, v (virsh on this vmmd), start_destination and d (a second vmmd), domain_qmp,
# pattern_domain FILE (a 64 MiB 'demo' running the pattern
# guest), stress_domain FILE (a 128 MiB 'demo' rewriting 32 MiB), guest_runs_clean.
# Ports: each test draws from a range of its own, as ctest runs them side by side (a shared
# range once gave two the same port), below the kernel's ephemeral ports (32768 up), which any
# test's outgoing connection may hold (one in 53600-53999 once did). Migration ports:
# virsh_migrate 22400-22799, virsh_postcopy 22900-23299, virsh_postcopy_recover 23400-23799,
# virsh_rdma 23900-24299, packaging/install 24400-24799, virsh_tls 25000-25399, virsh_migrate_tls
# 25400-25799, virsh_crash 25800-26199, golibvirt 26200-26599, tshark_dissector 26600-26999,
# virt_manager 27000-27399, virsh_flap 27400-27599 (rdma: 27600-27799), virsh_fallback 27800-27999, virsh_switchover 18600-18799, virsh_stall 18800-18999, each plus the few it counts up. A vmmd's TCP listener:
# virsh_postcopy_recover 16200-16599, virsh_migrate 16600-16999, virsh_evacuate 17000-17399,
# tshark_dissector 17400-18199. vmmctl_qmp 18200-18599; scripts/demo.sh 28000-31999. The C++ tests
# (libvirt_api_test.cc and the rest) take free ports from the kernel (free_tcp_port).
# RSA keys the build made ahead (scripts/make-test-pki.sh takes them instead of making its own).
[ -d "${build:-}/tests/key-pool" ] && export VMM_TEST_KEY_POOL="$build/tests/key-pool"
command -v virsh >/dev/null || { echo "SKIP: needs virsh (apt-get install libvirt-clients)"; exit 77; }
. "$(dirname "${BASH_SOURCE[0]}")/virsh_shell.sh"  # v and d keep a virsh shell open

dir=$(mktemp -d /tmp/vmmd-virsh.XXXXXX)
sock=$dir/sock
uri="vmm+unix:///system?socket=$sock"
pid=
also_kill=()  # more daemons a test started
cleanup() {
    stop_vmmd
    vsh_close d
    for p in "${also_kill[@]}"; do kill "$p" 2>/dev/null; done
    pkill -KILL -f -- "--qmp unix:$dir/" 2>/dev/null  # vmm processes outlive vmmd by design
    rm -rf "$dir"
}
trap cleanup EXIT

start_vmmd() {  # start_vmmd BUILD_DIR [VMMD-ARGS...]
    "$1/bin/vmmd" --socket "$sock" --state-dir "$dir/state" "${@:2}" >>"$dir/log" 2>&1 &
    pid=$!
    wait_until 60 answers "$uri" || fail "vmmd did not listen within 60 s"  # seconds in the nested VM
    vsh_open v "$uri"
}
answers() { virsh -c "$1" uri >/dev/null 2>&1; }  # answers URI: a vmmd serves URI
stop_vmmd() {
    vsh_close v
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    pid=
}
fail() {
    echo "FAIL: $*"
    echo "--- vmmd log"
    cat "$dir/log"
    [ -f "$dir/dlog" ] && { echo "--- destination vmmd log"; cat "$dir/dlog"; }
    for f in "$dir"/state/log/*.log "$dir"/dstate/log/*.log; do
        [ -f "$f" ] && { echo "--- ${f#"$dir"/} (last lines)"; tail -n 15 "$f"; }
    done
    exit 1
}
# Inside the nested VM (softroce-inside.sh sets VMM_NESTED_TCG) every program runs emulated, and
# a virsh call alone takes seconds: each wait there allows five times as long.
wait_scale=$([ -n "${VMM_NESTED_TCG:-}" ] && echo 5 || echo 1)
wait_until() {  # wait_until SECONDS COMMAND...: true once COMMAND succeeds, false after SECONDS (scaled)
    local end=$((SECONDS + $1 * wait_scale))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.1
    done
}
expect() {  # expect WHAT OUTPUT PATTERN
    grep -qE -- "$3" <<<"$2" || fail "$1: '$3' not in: $2"
    echo "ok: $1"
}
v() { vsh_call v "$uri" "$@"; }
# start_destination PREFIX [VMMD-ARGS...]: a second vmmd (PREFIX/bin/vmmd, socket $dir/dsock,
# state $dir/dstate) for migrations; sets duri, and d runs virsh on it.
start_destination() {
    local prefix=$1
    shift
    "$prefix/bin/vmmd" --socket "$dir/dsock" --state-dir "$dir/dstate" "$@" >>"$dir/dlog" 2>&1 &
    also_kill+=($!)
    duri="vmm+unix:///system?socket=$dir/dsock"
    wait_until 60 answers "$duri" || fail "the destination vmmd did not listen within 60 s"
    vsh_open d "$duri"
}
d() { vsh_call d "$duri" "$@"; }
# domain_qmp VMMCTL STATE DOMAIN COMMAND: one QMP command to DOMAIN's vmm, on this vmmd (STATE
# 'state'), the destination ('dstate') or a third ('tstate', reached at $turi).
domain_qmp() {
    local on u
    case "$2" in state) on=$uri ;; dstate) on=$duri ;; *) on=${turi:?a third vmmd: set turi} ;; esac
    case "$2" in state) u=$(v domuuid "$3") ;; dstate) u=$(d domuuid "$3") ;; *) u=$(virsh -c "$on" domuuid "$3") ;; esac ||
        return 1  # $(): no trailing blank line
    "$1" --qmp "unix:$dir/$2/run/$u.qmp" "$4"
}
# demo_domain FILE MIB KERNEL [CMDLINE]: a one-vCPU 'demo' of MIB MiB running the KERNEL payload.
demo_domain() {
    local cmdline=${4:+<cmdline>$4</cmdline>}
    cat >"$1" <<XML
<domain type='vmm'>
  <name>demo</name>
  <memory unit='MiB'>$2</memory>
  <vcpu>1</vcpu>
  <os><type>hvm</type><kernel>$3</kernel>$cmdline</os>
</domain>
XML
}
# In the nested VM a guest that spins takes the one emulated CPU every virsh call needs (a call
# took 1 s beside one pattern guest, 0.35 s beside none, 5 to 7 s beside eight): there the pattern
# guest rests 20 ms after each step (pattern_rest, for a payload command line), and still checks
# every page each pass.
pattern_rest=$([ -n "${VMM_NESTED_TCG:-}" ] && echo rest_us=20000)
# The same for a stress guest that need not outrun a migration (stress_rest: 50 ms after a pass).
stress_rest=$([ -n "${VMM_NESTED_TCG:-}" ] && echo rest_us=50000)
pattern_domain() { demo_domain "$1" 64 pattern "$pattern_rest"; }

# stress_domain FILE: a 128 MiB 'demo' whose stress guest keeps rewriting 32 MiB, faster than the
# postcopy tests' caps move it.
stress_domain() { demo_domain "$1" 128 stress bytes=32M; }
# guest_runs_clean VMMCTL STATE: demo's guest steps on there (state dir 'state' or 'dstate') and
# has found no error in its memory.
guest_runs_clean() {
    local first now
    first=$(domain_qmp "$1" "$2" demo query-guest) || fail "query-guest: $first"
    guest_stepped() {
        now=$(domain_qmp "$1" "$2" demo query-guest) &&
            [ "$(sed -n 's/.*"steps":\([0-9]*\).*/\1/p' <<<"$now")" -gt "$(sed -n 's/.*"steps":\([0-9]*\).*/\1/p' <<<"$first")" ]
    }
    wait_until 60 guest_stepped "$1" "$2" ||
        fail "the guest does not run in $2: steps $(sed -n 's/.*"steps":\([0-9]*\).*/\1/p' <<<"$now") as before; its vmm says $(domain_qmp "$1" "$2" demo query-status)"
    [ "$(sed -n 's/.*"errors":\([0-9]*\).*/\1/p' <<<"$now")" = 0 ] || fail "the guest found errors: $now"
}

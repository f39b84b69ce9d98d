#!/usr/bin/env bash
# A soak of live migrations back and forth between two vmmd, driven by stock virsh, with a fault
# drawn at random (seeded) for each: none; a flap (the vmm link cut by the source vmm's
# migrate_pause while the destination's vmm is stopped for 0.5-3 s, inside vmm's x-resume-window);
# the destination's vmm killed; a cancel (virsh domjobabort); the destination's vmmd killed and
# started again (its vmm carries on and is adopted). After each it counts where the guest runs:
# exactly one running copy is right; none is a lost guest, two a duplicated one. The guest is the
# pattern payload over 3/4 of its memory (the migration has that much to move while the fault
# lands), which checks its own memory: an error it finds is counted too. At the end:
# completed / failed cleanly / lost / duplicated / guest errors, and each vmmd's descriptors,
# threads and resident memory at the start and the end. Exits non-zero on a lost or duplicated
# guest, a guest error, a migration without a fault that did not complete, or a migration that
# left the domain in neither state.
#   scripts/soak.sh [--migrations 20] [--seed N] [--mem 64] [--speed 32] [--flap 0.5-3]
#                   [--transport tcp|rdma] [--limit 300]
# --flap MIN-MAX: the outage a flap holds, seconds (the issue's soak asks 0.5-20; below the
# 30 s x-resume-window either way). --transport rdma: each migration over rdma://$VMM_RDMA_ADDR
# (this machine's RDMA device, e.g. in scripts/softroce-run.sh's nested VM), with --rdma-pin-all
# for half of them, drawn as the faults are. --limit SECONDS: a migration whose virsh has not
# returned by then is a hang: what both sides say of it is printed, and the soak stops, failed.
# VMM_SOAK_KEEP_LOGS=DIR keeps both vmmd's logs and their domains' vmm logs there.
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

migrations=20 seed=$RANDOM mem=64 speed=32 flap=0.5-3 transport=tcp limit=300
while [ $# -gt 0 ]; do
    case "$1" in
        --flap) flap=$2; shift 2 ;;
        --transport) transport=$2; shift 2 ;;
        --migrations) migrations=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --mem) mem=$2; shift 2 ;;
        --speed) speed=$2; shift 2 ;;
        --limit) limit=$2; shift 2 ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
if [ -z "${VMM_SOAK_NO_BUILD:-}" ]; then  # the test of the soak runs it on the build under test
    pkgs=("${VMM_CORE_PACKAGES[@]}" "${VMM_VIRSH_PACKAGES[@]}")
    build_only pkgs vmm vmmctl guest_payloads vmmd
fi
kvm_usable || die "$(why_no_kvm); the soak runs guests"
[[ "$limit" =~ ^[1-9][0-9]*$ ]] || die "--limit SECONDS, a whole number above 0 (not $limit)"
[[ "$flap" =~ ^([0-9]+(\.[0-9]+)?)-([0-9]+(\.[0-9]+)?)$ ]] || die "--flap MIN-MAX in seconds, e.g. 0.5-20 (not $flap)"
flap_min=${BASH_REMATCH[1]} flap_max=${BASH_REMATCH[3]}
awk -v a="$flap_min" -v b="$flap_max" 'BEGIN { exit !(a <= b && b < 30) }' ||
    die "--flap $flap: MIN at most MAX, and MAX under the 30 s x-resume-window"
case $transport in
    tcp) ;;
    rdma)
        [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ] || die "--transport rdma needs an RDMA device (scripts/softroce-run.sh gives one)"
        [ -n "${VMM_RDMA_ADDR:-}" ] || die "set VMM_RDMA_ADDR to an IPv4 address of this machine's RDMA device" ;;
    *) die "--transport tcp or rdma (not $transport)" ;;
esac
command -v virsh >/dev/null || die "virsh is missing: apt-get install libvirt-clients"
RANDOM=$seed

work=$(mktemp -d /tmp/vmm-soak.XXXXXX)
declare -A vmmd_pid
cleanup() {
    for h in a b; do [ -n "${vmmd_pid[$h]:-}" ] && kill "${vmmd_pid[$h]}" 2>/dev/null; done
    pkill -CONT -f -- "--qmp unix:$work/" 2>/dev/null || true
    pkill -KILL -f -- "--qmp unix:$work/" 2>/dev/null || true  # domains' vmm outlive vmmd by design
    wait 2>/dev/null || true
    if [ -n "${VMM_SOAK_KEEP_LOGS:-}" ]; then  # each vmmd's log, and its domains' vmm logs
        mkdir -p "$VMM_SOAK_KEEP_LOGS"
        cp "$work/migrate.out" "$VMM_SOAK_KEEP_LOGS/virsh-migrate-last.out" 2>/dev/null || true
        for h in a b; do
            cp "$work/$h/log" "$VMM_SOAK_KEEP_LOGS/vmmd-$h.log" 2>/dev/null || true
            for f in "$work/$h"/state/log/*.log; do [ -f "$f" ] && cp "$f" "$VMM_SOAK_KEEP_LOGS/$h-${f##*/}"; done
        done
    fi
    rm -rf "$work"
}
trap cleanup EXIT
uri() { echo "vmm+unix:///system?socket=$work/$1/sock"; }
v() { local h=$1; shift; virsh -q -c "$(uri "$h")" "$@" 2>&1; }
other() { [ "$1" = a ] && echo b || echo a; }
start_vmmd() {
    mkdir -p "$work/$1"
    "$BUILD/bin/vmmd" --socket "$work/$1/sock" --state-dir "$work/$1/state" >>"$work/$1/log" 2>&1 &
    vmmd_pid[$1]=$!
    for _ in $(seq 1 300); do virsh -c "$(uri "$1")" uri >/dev/null 2>&1 && return 0; sleep 0.1; done
    die "vmmd $1 did not start: $(tail -3 "$work/$1/log")"
}
vmm_of() { pgrep -f -- "--qmp unix:$work/$1/state/run/" || true; }  # the domain's vmm on host $1
qmp() { "$BUILD/bin/vmmctl" --qmp "unix:$(ls "$work/$1"/state/run/*.qmp 2>/dev/null | head -1)" "$2" 2>/dev/null; }
runs_on() { [ "$(v "$1" domstate soak 2>/dev/null | head -1)" = running ]; }
# show_sides: what each host says of the domain and its migration, and its logs' last lines
# (a hang's or a lost guest's evidence).
show_sides() {
    local h
    echo "   virsh migrate: $(tail -3 "$work/migrate.out" | tr '\n' ' ')"
    for h in a b; do
        echo "   $h: domstate $(v "$h" domstate soak --reason 2>&1 | head -1); vmm pid $(vmm_of "$h" | tr '\n' ' ')"
        echo "   $h: query-migrate $(qmp "$h" query-migrate | head -c 600)"
        v "$h" domjobinfo soak 2>&1 | grep -E 'Job type|Operation|Time elapsed|Data remaining' | sed "s/^/   $h: /"
        tail -4 "$work/$h/log" | sed "s/^/   $h vmmd: /"
        for f in "$work/$h"/state/log/*.log; do [ -f "$f" ] && tail -6 "$f" | sed "s/^/   $h vmm: /"; done
    done
}
sample() {  # sample HOST: descriptors threads RSS-KiB of its vmmd
    local p=${vmmd_pid[$1]}
    echo "$(ls "/proc/$p/fd" | wc -l) $(awk '/^Threads:/{print $2}' "/proc/$p/status") $(awk '/^VmRSS:/{print $2}' "/proc/$p/status")"
}

start_vmmd a
start_vmmd b
# Over rdma libvirt asks a memory hard limit (pinned RAM counts against it): the RAM and 256 MiB.
memtune=
[ "$transport" = rdma ] && memtune="<memtune><hard_limit unit='MiB'>$((mem + 256))</hard_limit></memtune>"
cat >"$work/soak.xml" <<XML
<domain type='vmm'>
  <name>soak</name>
  <memory unit='MiB'>$mem</memory>
  $memtune
  <vcpu>1</vcpu>
  <os><type>hvm</type><kernel>pattern</kernel><cmdline>bytes=$((mem * 3 / 4))M</cmdline></os>
</domain>
XML
v a define "$work/soak.xml" >/dev/null || die "define failed"
v a start soak >/dev/null || die "start failed"
host=a
declare -A first last
# What each vmmd holds at the start, once it is steady (a connection virsh has just closed may
# still be open): two samples 0.2 s apart that agree, within 10 s.
fds() { local n=0 h f; for h in a b; do read -r f _ <<<"$(sample "$h")"; n=$((n + f)); done; echo "$n"; }
prev=-1
for _ in $(seq 1 50); do now=$(fds); [ "$now" = "$prev" ] && break; prev=$now; sleep 0.2; done
for h in a b; do first[$h]=$(sample "$h"); done
faults=(none none flap flap kill cancel vmmd)
declare -A count=([completed]=0 [failed-cleanly]=0 [lost]=0 [duplicated]=0 [guest-errors]=0 [unfaulted-failed]=0 [hung]=0)
declare -A by_fault
late_faults=0
log "soak: $migrations migrations over $transport of a $mem MiB pattern guest between two vmmd at $speed MiB/s, flaps of $flap s, seed $seed"
for i in $(seq 1 "$migrations"); do
    to=$(other "$host")
    fault=${faults[$((RANDOM % ${#faults[@]}))]}
    port=$(( 28000 + RANDOM % 3000 ))
    began=$(date +%s%N)
    v "$host" migrate-setspeed soak "$speed" >/dev/null || true
    how=(--migrateuri "tcp://127.0.0.1:$port") mode=
    if [ "$transport" = rdma ]; then
        how=(--migrateuri "rdma://$VMM_RDMA_ADDR:$port") mode=dyn
        [ $((RANDOM % 2)) = 0 ] || { how+=(--rdma-pin-all); mode=pin; }
    fi
    virsh -c "$(uri "$host")" migrate --live --persistent --undefinesource soak "$(uri "$to")" \
        "${how[@]}" >"$work/migrate.out" 2>&1 &
    mig=$!
    # The fault goes in once the migration is active; one that ended first (a small guest is
    # quick) gets its fault after, and says so ("late"). Its end is seen by virsh ending: the
    # source's vmm leaves with its guest, and one that stays shows the last migration's status.
    late=late
    for _ in $(seq 1 200); do
        st=$(qmp "$host" query-migrate) || st=  # no answer yet: not active
        grep -q '"status":"active"' <<<"$st" && { late=; break; }
        kill -0 "$mig" 2>/dev/null || break
        sleep 0.05
    done
    case $fault in
        flap)
            dpid=$(vmm_of "$to")
            if [ -n "$dpid" ]; then
                kill -STOP $dpid
                qmp "$host" migrate-pause >/dev/null || true
                sleep "$(awk -v r=$RANDOM -v a="$flap_min" -v b="$flap_max" 'BEGIN{printf "%.1f", a + (b - a) * r / 32767}')"
                kill -CONT $dpid
            fi ;;
        kill)
            # Frozen first: a stopped destination cannot take the guest. Killed only if the
            # migration is still in its rounds then; one that went on to the switchover or past it
            # while the fault was being aimed (a slow machine's monitor calls take seconds) may
            # have the guest running there already, and killing that is the soak's doing: late.
            dpid=$(vmm_of "$to")
            if [ -n "$dpid" ]; then
                kill -STOP $dpid
                st=$(qmp "$host" query-migrate) || st=
                if kill -0 "$mig" 2>/dev/null && grep -q '"status":"active"' <<<"$st"; then
                    kill -KILL $dpid
                else
                    kill -CONT $dpid
                    late=late
                fi
            fi ;;
        cancel) v "$host" domjobabort soak >/dev/null || true ;;
        vmmd)
            kill -KILL "${vmmd_pid[$to]}"; wait "${vmmd_pid[$to]}" 2>/dev/null || true
            sleep 0.5
            start_vmmd "$to" ;;
    esac
    # virsh's end, within --limit: one that hangs is shown from both sides and ends the soak.
    waited=0
    while kill -0 "$mig" 2>/dev/null && [ "$waited" -lt $((limit * 10)) ]; do sleep 0.1; waited=$((waited + 1)); done
    if kill -0 "$mig" 2>/dev/null; then
        echo "$i  $fault: virsh migrate has not returned in $limit s: a hang; both sides now:"
        show_sides
        kill "$mig" 2>/dev/null; wait "$mig" 2>/dev/null
        count[hung]=1
        break
    fi
    rc=0; wait "$mig" || rc=$?
    # Settled: the domain runs on exactly one side (a vmmd that restarted may take a moment).
    # Asked for 60 s at most (each virsh call takes a second in the nested VM).
    settle_end=$(( $(date +%s) + 60 ))
    while :; do
        a_runs=0 b_runs=0
        runs_on a && a_runs=1
        runs_on b && b_runs=1
        [ $((a_runs + b_runs)) -eq 1 ] || [ "$(date +%s)" -ge "$settle_end" ] && break
        sleep 0.1
    done
    if [ $((a_runs + b_runs)) -eq 2 ]; then
        outcome=duplicated
    elif [ $((a_runs + b_runs)) -eq 0 ]; then
        outcome=lost
    elif { [ "$a_runs" = 1 ] && [ "$to" = a ]; } || { [ "$b_runs" = 1 ] && [ "$to" = b ]; }; then
        outcome=completed host=$to
    else
        outcome=failed-cleanly
    fi
    count[$outcome]=$((count[$outcome] + 1))
    # Without a fault a migration must complete: one that did not is a failure of its own.
    if [ "$fault" = none ] && [ "$outcome" != completed ]; then
        count[unfaulted-failed]=$((count[unfaulted-failed] + 1))
        echo "     without a fault, it did not complete: $(tail -3 "$work/migrate.out" | tr '\n' ' ')"
    fi
    [ -z "$late" ] || [ "$fault" = none ] || late_faults=$((late_faults + 1))
    by_fault[$fault]="${by_fault[$fault]:-} $outcome"
    errors=$(qmp "$host" query-guest | sed -n 's/.*"errors":\([0-9]*\).*/\1/p')
    [ "${errors:-0}" = 0 ] || count[guest-errors]=$((count[guest-errors] + 1))
    printf '%3d  %-6s%-5s %s -> %s %-3s  %-15s virsh rc %d  %5.1f s%s\n' "$i" "$fault" "${late:+ late}" "$(other "$to")" "$to" "$mode" "$outcome" "$rc" \
        "$(awk -v a="$began" -v b="$(date +%s%N)" 'BEGIN{print (b - a) / 1e9}')" \
        "$([ "${errors:-0}" = 0 ] || echo "  guest errors $errors")"
    [ "$outcome" = lost ] || [ "$outcome" = duplicated ] && { tail -5 "$work/migrate.out"; show_sides; break; }
done
# The daemons settle first: a connection virsh has just closed, or the vmm the last fault ended,
# is let go within moments, and a leak stays. Sampled until both vmmd hold no more descriptors
# than at the start, or for 10 s.
start_fds=0
for h in a b; do read -r f _ <<<"${first[$h]}"; start_fds=$((start_fds + f)); done
for _ in $(seq 1 100); do [ "$(fds)" -le "$start_fds" ] && break; sleep 0.1; done
for h in a b; do last[$h]=$(sample "$h"); done

printf '\n\033[1msoak over %s, seed %s\033[0m  %s  %s, %s cores\n' "$transport" "$seed" "$(date -u +%FT%TZ)" \
    "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')" "$(nproc)"
printf 'migrations %d: completed %d, failed cleanly %d, lost %d, duplicated %d, guest errors %d, failed without a fault %d, hung %d\n' "$i" \
    "${count[completed]}" "${count[failed-cleanly]}" "${count[lost]}" "${count[duplicated]}" "${count[guest-errors]}" \
    "${count[unfaulted-failed]}" "${count[hung]}"
[ "$late_faults" = 0 ] || printf '  %d of the faults came after their migration had ended ("late")\n' "$late_faults"
for f in "${!by_fault[@]}"; do
    printf '  %-6s %s\n' "$f" "$(tr ' ' '\n' <<<"${by_fault[$f]}" | grep . | sort | uniq -c | awk '{printf "%s %s, ", $1, $2}' | sed 's/, $//')"
done
printf 'vmmd       descriptors   threads   RSS KiB   (start -> end; b was restarted by the vmmd faults)\n'
for h in a b; do
    read -r f0 t0 r0 <<<"${first[$h]}"; read -r f1 t1 r1 <<<"${last[$h]}"
    printf '  %s        %4d -> %-4d  %3d -> %-3d  %6d -> %d\n' "$h" "$f0" "$f1" "$t0" "$t1" "$r0" "$r1"
done
[ "${count[lost]}" = 0 ] && [ "${count[duplicated]}" = 0 ] && [ "${count[guest-errors]}" = 0 ] && [ "${count[unfaulted-failed]}" = 0 ] &&
    [ "${count[hung]}" = 0 ]

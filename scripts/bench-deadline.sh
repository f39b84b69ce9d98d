#!/usr/bin/env bash
# Deadline benchmark (issue 63): how well vmm's plan predicts a migration, whether its ETA gets
# better as it goes, and whether a deadline is kept; beside QEMU 7.2 driven as fleets drive it
# (OpenStack Nova's policy), the same guests and caps, in this one run. No figure is compared
# with one from elsewhere.
#
# Guests: the stress payload, 1 vCPU, 256 MiB, --fill (32M) written once and then held, and:
#   idle     a 4 KiB hot set
#   1/8 1/2 1 4   --stream (32M) rewritten at that many times the link's rate (the stride slowed to
#            it from the guest's pace measured first; the rate measured is what the table shows)
#   hotset   a hot set of 2 x what the link moves in downtime-limit (300 ms), rewritten at half
#            the link's rate
# Caps (--caps, MiB/s): max-bandwidth and max-postcopy-bandwidth both, the link as migrations see it.
# Per guest and cap:
#   plan     vmm's x-query-migrate-plan before migrating: precopy's predicted total, or "never"
#   precopy  vmm, no deadline (cancelled at 4 x its plan, or 2 x the floor when the plan says it
#            never ends: such a verdict is checked too; at most 10 x the floor): query-migrate every 100 ms; the total
#            predicted (elapsed + x-expected-remaining-ms) 1 s in (the link measured for a
#            second), once the first round has ended, and at the last round's start, against the
#            total measured
#   vmm      x-deadline D = 1.5 x what the populated RAM takes at the cap, x-deadline-strategy
#            postcopy (postcopy-ram on both sides): feasible when the plan's precopy or
#            postcopy-at-once total fits D
#   qemu     QEMU 7.2, the same guest, cap and D as Nova's completion timeout: downtime-limit
#            50 -> 500 ms in 10 steps over 0.94 D, then migrate-start-postcopy at D
#            (scripts/lib/bench-deadline-drive.py)
#   tight    vmm with D = 0.5 x the populated RAM's time at the cap, strategy postcopy: it cannot be
#            met, and vmm must say so at once (the migration fails within a second, saying what
#            would meet it, the guest running on)
#   vmm-ac   where post-copy is not permitted: vmm with the same D, x-deadline-strategy throttle,
#            postcopy-ram off; feasible when the plan's precopy or precopy + auto-converge fits D
#   qemu-ac  QEMU 7.2 under Nova's policy without post-copy: auto-converge on from the start, the
#            same downtime steps, and at D the guest paused (force_complete), the destination
#            resumed once the stop-and-copy ends
#   vmm-dt   the same D kept by one pause: x-deadline-strategy downtime, x-deadline-max-downtime D;
#            the plan's one-pause row, made just before, against it
#   vmm-ch   the same D by x-deadline-strategy cheapest (x-deadline-max-downtime D): the pause or
#            the throttle, whichever the plan says costs the guest less; what it chose (its log
#            line) against what the two arms above cost
#   vmm-ac-late, vmm-dt-late   where QEMU ended after D: vmm (throttle, then one pause) on a guest of
#            its own with x-deadline D' = the time QEMU took, its last pause taken at the cap: what
#            each costs the guest beside QEMU when both end at the same time
# The last pause at the cap: both VMMs send their stop-and-copy uncapped, which on loopback takes
# milliseconds whatever it carries; on a link of the cap's rate it takes downtime-bytes / cap.
# The tables of the no-post-copy variant count it so (a pause measured shorter is raised to it).
# Blocked time: the destination's postcopy-blocktime (both VMMs measure it the same way), and for
# qemu-ac the time the guest stood paused (from the stop to the migration's end); throttled time:
# cpu-throttle-percentage integrated over the samples.
#
#   scripts/bench-deadline.sh [--quick] [--caps 4,16] [--fill 32M] [--stream 32M] [--guests idle,1/8,...]
#                             [--variants postcopy,auto-converge] [--warm 34] [--no-qemu] [--out DIR]
# --warm S: how long each guest runs on a vmm before it is planned or migrated (34 s). vmm's
# sampler sees working sets over windows of 4 to 32 s of what it has watched, and a stream over a
# bounded area shows as one only in a window twice a pass: a 32 MiB stream rewritten every 15 s
# (1/2 x at 4 MiB/s) once 32 s have been watched. A shorter --warm plans such a guest as streaming.
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

caps=4,16 fill=32M stream=32M guests="idle 1/8 1/2 1 4 hotset" out=$PWD qemu=1 variants="postcopy auto-converge" warm_s=34
while [ $# -gt 0 ]; do
    case "$1" in
        --caps) caps=$2; shift 2 ;;
        --fill) fill=$2; shift 2 ;;
        --stream) stream=$2; shift 2 ;;
        --guests) guests=${2//,/ }; shift 2 ;;
        --variants) variants=${2//,/ }; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --warm) warm_s=$2; shift 2 ;;
        --no-qemu) qemu=0; shift ;;
        --quick) caps=8 fill=16M stream=16M guests="idle 1/2 4 hotset"; shift ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
for v in $variants; do
    case "$v" in postcopy|auto-converge) ;; *) die "unknown variant $v (postcopy, auto-converge)" ;; esac
done
kvm_usable || die "needs /dev/kvm (both VMMs run the guests under KVM)"
ensure_packages jq qemu-system-x86
build
VMM="$BUILD/bin/vmm" CTL="$BUILD/bin/vmmctl" PAYLOAD="$BUILD/guest/stress.elf"
DRIVE="$ROOT/scripts/lib/bench-deadline-drive.py"
PY=$(command -v python3)
work=$(mktemp -d /tmp/vmm-bench-deadline.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
mem=256M
results=$work/results.jsonl
: >"$results"

q() { "$CTL" --qmp "unix:$work/$1.qmp" "${@:2}"; }   # q VM COMMAND [ARGS-JSON]
h() { "$CTL" "unix:$work/$1.hmp" "$2"; }              # h VM HMP-LINE
port() { echo $((20000 + RANDOM % 20000)); }
bytes_of() { numfmt --from=iec "$1"; }

# vmm_start NAME ARGS...: a vmm with QMP and HMP sockets in $work.
vmm_start() {
    local name=$1; shift
    rm -f "$work/$name.ser" "$work/$name.qmp" "$work/$name.hmp"
    "$VMM" -m "$mem" --smp 1 --qmp "unix:$work/$name.qmp" --monitor "unix:$work/$name.hmp" \
        --serial "file:$work/$name.ser" "$@" >"$work/$name.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 100); do [ -S "$work/$name.qmp" ] && [ -S "$work/$name.hmp" ] && return 0; sleep 0.1; done
    die "vmm $name did not start: $(tail -3 "$work/$name.log")"
}
qemu_start() {  # qemu_start NAME ARGS...
    local name=$1; shift
    rm -f "$work/$name.ser" "$work/$name.qmp"
    qemu-system-x86_64 -accel kvm -cpu host,-arch-capabilities -m "$mem" -smp 1 -nodefaults -no-user-config \
        -display none -qmp "unix:$work/$name.qmp,server=on,wait=off" -serial "file:$work/$name.ser" "$@" \
        >"$work/$name.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 100); do [ -S "$work/$name.qmp" ] && return 0; sleep 0.1; done
    die "QEMU $name did not start: $(tail -3 "$work/$name.log")"
}
# warm NAME [S]: the guest filled its RAM and has rewritten its hot set for S s (--warm) since:
# vmm's sampler sees the working set over windows of 4 to 32 s of what it watched, and the plan
# reads the window where the set stops growing, which the fill (written once) must not be all of.
# (Its pass lines are no clock: without a TSC scale the guest prints one every 1024 passes.)
warm() {
    for _ in $(seq 1 600); do
        grep -q '^stress: pass' "$work/$1.ser" 2>/dev/null && { sleep "${2:-$warm_s}"; warmed=$1; return 0; }
        sleep 0.1
    done
    die "the stress guest on $1 did not get going: $(tail -2 "$work/$1.ser" 2>/dev/null)"
}
stop() { for vm in "$@"; do q "$vm" quit >/dev/null 2>&1 || true; done; }
guest_args() { echo "fill=$fill bytes=$1 stride=$2 ctl=0"; }

# The guest's pace: the rate it dirties a 64 MiB stream at a few strides (a page costs a fixed
# part and a part per word written, neither steady enough here to model), for the strides that
# give the rates asked.
pace="[]"
for st in 16 128 1024 4096; do
    vmm_start probe --guest stress --append "$(guest_args 64M "$st")"
    warm probe 10
    pace=$(jq -c --argjson s "$st" --argjson r "$(q probe query-dirty-rate | jq '."dirty-rate" * 1048576')" '. + [[$s, $r]]' <<<"$pace")
    stop probe
done
log "the stress guest's pace (stride, bytes/s): $pace"

# hot_and_stride GUEST CAP_MIB: "HOT_BYTES STRIDE". The rates are streams: the guest rewrites
# --stream bytes at that rate, its stride slowed to it from its measured pace, so a round leaves
# less dirty the shorter it was.
stride_for() {  # stride_for BYTES_PER_S: interpolated (log-log) between the strides measured
    jq -rn --argjson r "$1" --argjson p "$pace" '
        def between($a; $b): ((($r | log) - ($a[1] | log)) / (($b[1] | log) - ($a[1] | log))) as $f |
                             (($a[0] | log) + $f * (($b[0] | log) - ($a[0] | log))) | exp;
        ($p | sort_by(.[1])) as $q |
        (if $r <= $q[0][1] then $q[0][0] elif $r >= $q[-1][1] then $q[-1][0]
         else ([range(1; $q | length) as $i | select($q[$i][1] >= $r and $q[$i - 1][1] < $r) | between($q[$i - 1]; $q[$i])] | .[0])
         end) | ((. / 8 | round) * 8) | if . < 8 then 8 elif . > 4096 then 4096 else . end'
}
hot_and_stride() {
    local cap=$2 mib=1048576
    case "$1" in
        idle) echo "4096 4096" ;;
        1/8) echo "$(bytes_of "$stream") $(stride_for $((cap * mib / 8)))" ;;
        1/2) echo "$(bytes_of "$stream") $(stride_for $((cap * mib / 2)))" ;;
        1) echo "$(bytes_of "$stream") $(stride_for $((cap * mib)))" ;;
        4) echo "$(bytes_of "$stream") $(stride_for $((cap * mib * 4)))" ;;
        hotset) echo "$(( (cap * mib * 6 / 10) / 4096 * 4096 )) $(stride_for $((cap * mib / 2)))" ;;
        *) die "unknown guest $1" ;;
    esac
}

# drive SRC DST_URI POLICY DEADLINE_MS OUT: the driver's samples into OUT.
drive() { "$PY" "$DRIVE" "$work/$1.qmp" "$2" "$3" "$4" >"$5"; }

# summary_of SAMPLES: the run's facts from its samples: total, downtime, status, error, the
# prediction after the first round and at the last round's start, throttled ms.
summary_of() {
    jq -s '
        [.[] | select(.q)] as $s | ($s | last | .q) as $fin |
        def pred: .q["total-time"] + .q["x-expected-remaining-ms"];
        def first_pred(f): [$s[] | select(.q.status == "active" and .q["x-expected-remaining-ms"] != null) | select(f)] |
                           if length == 0 then null else .[0] | pred end;
        ($s | map(.q["x-rounds"] // 0) | max) as $rounds |
        first_pred(.t >= 1) as $early |
        first_pred(.q["x-rounds"] >= 1) as $first |
        (if $rounds >= 3 then first_pred(.q["x-rounds"] == $rounds - 2) else null end) as $last |
        {status: $fin.status, total_ms: $fin["total-time"], downtime_ms: $fin.downtime,
         downtime_bytes: ($fin.ram["downtime-bytes"] // null),
         error: ($fin["error-desc"] // null), rounds: $rounds,
         first_s: ($s | map(select(.q.status == "failed" or .q.status == "cancelled")) | if length == 0 then null else .[0].t end),
         pred_early_ms: $early, pred_first_ms: $first, pred_last_ms: $last,
         postcopy: ([$s[] | select(.q.status == "postcopy-active")] | length > 0),
         throttled_ms: ([range(1; $s | length) as $i | ($s[$i].t - $s[$i - 1].t) * 1000 * (($s[$i].q["cpu-throttle-percentage"] // 0) / 100)] | add // 0 | round),
         policy: (.[-1].policy // [])}' "$1"
}

record() {  # record JSON: one result line
    echo "$1" >>"$results"
}

# plan_of VM: vmm's x-query-migrate-plan (at the cap set as max-bandwidth).
plan_of() { q "$1" x-query-migrate-plan; }
strategy() { jq -c --arg n "$2" '.strategies[] | select(.strategy == $n)' <<<"$1"; }  # strategy PLAN NAME

# vmm_pair_settings SRC DST CAP POSTCOPY: the cap on the source, postcopy-ram on both if asked.
vmm_settings() {
    local src=$1 dst=$2 cap=$3 pc=$4
    h "$src" "migrate_set_parameter max-bandwidth ${cap}m" >/dev/null
    h "$src" "migrate_set_parameter max-postcopy-bandwidth ${cap}m" >/dev/null
    if [ "$pc" = 1 ]; then
        h "$src" "migrate_set_capability postcopy-ram on" >/dev/null
        h "$dst" "migrate_set_capability postcopy-ram on" >/dev/null
    fi
}
blocked_ms() { q "$1" query-migrate | jq '."postcopy-blocktime" // 0'; }  # the destination's
wants() { [[ " $variants " == *" $1 "* ]]; }  # wants VARIANT

run_guest() {  # run_guest GUEST CAP
    local g=$1 cap=$2 hot stride p uri name
    read -r hot stride <<<"$(hot_and_stride "$g" "$cap")"
    name="$cap-$(tr / _ <<<"$g")"
    local populated floor_ms d_ms
    # 1. vmm: the plan, then precopy alone when the plan says it ends.
    vmm_start "$name-a" --guest stress --append "$(guest_args "$hot" "$stride")"
    warm "$name-a"
    vmm_start "$name-b" --incoming defer
    vmm_settings "$name-a" "$name-b" "$cap" 0
    local rate plan pre
    rate=$(q "$name-a" query-dirty-rate | jq '."dirty-rate"')
    plan=$(plan_of "$name-a")
    populated=$(jq '."populated-bytes"' <<<"$plan")
    floor_ms=$(jq -n --argjson p "$populated" --argjson c "$cap" '$p / ($c * 1048576) * 1000 | ceil')
    d_ms=$((floor_ms * 3 / 2))
    pre=$(strategy "$plan" precopy)
    p=$(port) uri=tcp:127.0.0.1:$p
    h "$name-b" "migrate_incoming $uri" >/dev/null
    local src_next=$name-a bound r
    # Run even when the plan says it never ends (bounded): a "never" that ends is a plan missed too.
    # At most 10 x the floor: a guest on the knife's edge (q just under 1) is planned to end after
    # hundreds of seconds, and one that has not ended by then is a plan missed as well.
    bound=$(jq -n --argjson t "$(jq 'if .converges then ."total-ms" else 0 end' <<<"$pre")" --argjson f "$floor_ms" \
        '[([$t * 4, $f * 2, 20000] | max), ([$f * 10, 20000] | max)] | min | ceil')
    drive "$name-a" "$uri" none "$bound" "$work/$name-precopy.jsonl"
    r=$(summary_of "$work/$name-precopy.jsonl")
    record "$(jq -nc --arg g "$g" --argjson cap "$cap" --argjson rate "$rate" --argjson hot "$hot" --argjson stride "$stride" \
        --argjson plan "$pre" --argjson r "$r" --argjson bound "$bound" --argjson seen "$(jq -c '{dirty, "populated-bytes", "link-bytes-per-second"}' <<<"$plan")" \
        '{kind: "precopy", guest: $g, cap: $cap, dirty_rate: $rate, hot: $hot, stride: $stride, plan: $plan, plan_facts: $seen, bound_ms: $bound} + $r')"
    if [ "$(jq -r .status <<<"$r")" = completed ]; then src_next=$name-b; else stop "$name-b"; fi
    [ "$src_next" = "$name-a" ] || stop "$name-a"
    # 2. vmm with x-deadline D, each variant's strategy (the guest goes on from where it runs now).
    if wants postcopy; then
        vmm_deadline "$src_next" "$name-c" postcopy "$d_ms" "$floor_ms" "$g" "$cap"
        src_next=$moved_to
    fi
    if wants auto-converge; then
        vmm_deadline "$src_next" "$name-f" throttle "$d_ms" "$floor_ms" "$g" "$cap"
        src_next=$moved_to
        # The same D kept by one pause instead (downtime strategy, no ceiling short of D).
        vmm_deadline "$src_next" "$name-g" downtime "$d_ms" "$floor_ms" "$g" "$cap" vmm-dt
        src_next=$moved_to
        h "$src_next" "migrate_set_parameter downtime-limit 300" >/dev/null
        # And by whichever of the two the plan says costs the guest less.
        vmm_deadline "$src_next" "$name-h" cheapest "$d_ms" "$floor_ms" "$g" "$cap" vmm-ch
        src_next=$moved_to
        h "$src_next" "migrate_set_parameter downtime-limit 300" >/dev/null
    fi
    # 3. tight: D = half the floor, on the guest where it runs now; it must say so at once.
    vmm_start "$name-e" --incoming defer
    vmm_settings "$src_next" "$name-e" "$cap" 1
    h "$src_next" "migrate_set_parameter x-deadline $((floor_ms / 2))ms" >/dev/null
    h "$src_next" "migrate_set_parameter x-deadline-strategy postcopy" >/dev/null
    p=$(port) uri=tcp:127.0.0.1:$p
    h "$name-e" "migrate_incoming $uri" >/dev/null
    drive "$src_next" "$uri" none $((floor_ms * 4)) "$work/$name-tight.jsonl"
    record "$(jq -nc --arg g "$g" --argjson cap "$cap" --argjson d $((floor_ms / 2)) --argjson floor "$floor_ms" \
        --argjson r "$(summary_of "$work/$name-tight.jsonl")" --arg running "$(q "$src_next" query-status | jq -r .status)" \
        '{kind: "tight", guest: $g, cap: $cap, deadline_ms: $d, floor_ms: $floor, source_after: $running} + $r')"
    stop "$src_next" "$name-e"
    # 4. QEMU 7.2 under Nova's policy, D its completion timeout: each variant from a guest of its own.
    [ "$qemu" = 1 ] || return 0
    if wants postcopy; then qemu_deadline "$name-q" nova "$hot" "$stride" "$d_ms" "$floor_ms" "$g" "$cap"; fi
    if wants auto-converge; then
        qemu_deadline "$name-qac" nova-ac "$hot" "$stride" "$d_ms" "$floor_ms" "$g" "$cap"
        vmm_at_qemus_end "$name" "$hot" "$stride" "$floor_ms" "$g" "$cap"
    fi
}

# vmm_at_qemus_end NAME HOT STRIDE FLOOR_MS GUEST CAP: where QEMU's run (the last result) completed
# after D, vmm on a guest of its own with x-deadline = the time QEMU took: each strategy's cost to
# the guest beside QEMU's when both end at the same time (kinds vmm-ac-late: throttle,
# vmm-dt-late: downtime).
vmm_at_qemus_end() {
    local n=$1 hot=$2 stride=$3 floor_ms=$4 g=$5 cap=$6 late src
    # QEMU's total with its last pause at the cap (its stop-and-copy goes uncapped, as vmm's does).
    late=$(tail -1 "$results" | jq --argjson cap "$cap" 'select(.kind == "qemu-ac" and .status == "completed") |
        (.total_ms - .downtime_ms + ([.downtime_ms, (.downtime_bytes // 0) / ($cap * 1048576) * 1000] | max)) / 100 | ceil * 100')
    [ -n "$late" ] && [ "$late" -gt "$(tail -1 "$results" | jq .deadline_ms)" ] || return 0
    vmm_start "$n-l" --guest stress --append "$(guest_args "$hot" "$stride")"
    warm "$n-l"
    vmm_deadline "$n-l" "$n-m" throttle "$late" "$floor_ms" "$g" "$cap" vmm-ac-late
    src=$moved_to
    vmm_deadline "$src" "$n-n" downtime "$late" "$floor_ms" "$g" "$cap" vmm-dt-late
    stop "$moved_to"
}

# vmm_deadline SRC DST STRATEGY D_MS FLOOR_MS GUEST CAP: SRC's guest migrated to a new vmm DST with
# x-deadline D_MS and that strategy (postcopy-ram on both sides for postcopy, off otherwise); the
# run recorded as kind "vmm" (postcopy) or "vmm-ac" (throttle). Sets moved_to: where the guest
# runs after (DST if it completed; SRC, which is then still running, if not).
vmm_deadline() {
    local src=$1 dst=$2 strat=$3 d_ms=$4 floor_ms=$5 g=$6 cap=$7 pc=0 kind=${8:-vmm-ac} plan p uri r
    [ "$strat" = postcopy ] && pc=1 kind=vmm
    # The downtime strategy's ceiling: whatever pause meets D, as Nova's force_complete pauses as
    # long as the stop-and-copy takes.
    case "$strat" in downtime|cheapest) h "$src" "migrate_set_parameter x-deadline-max-downtime $d_ms" >/dev/null ;; esac
    # A guest that has just arrived: its new vmm's dirty sampler has not seen it yet, so neither
    # the plan nor the strategy would know its rates; as long as warm() gives a new one.
    [ "$src" = "${warmed:-}" ] || { sleep "$warm_s"; warmed=$src; }
    vmm_start "$dst" --incoming defer
    vmm_settings "$src" "$dst" "$cap" "$pc"
    [ "$pc" = 1 ] || h "$src" "migrate_set_capability postcopy-ram off" >/dev/null
    h "$src" "migrate_set_parameter x-deadline ${d_ms}ms" >/dev/null
    h "$src" "migrate_set_parameter x-deadline-strategy $strat" >/dev/null
    plan=$(plan_of "$src")
    p=$(port) uri=tcp:127.0.0.1:$p
    h "$dst" "migrate_incoming $uri" >/dev/null
    local logged
    logged=$(wc -l <"$work/$src.log")
    drive "$src" "$uri" none $((d_ms * 4)) "$work/$dst.jsonl"
    r=$(summary_of "$work/$dst.jsonl")
    # What the deadline keeper did, as the source's log says (cheapest says what each would cost).
    local acted
    acted=$(tail -n +$((logged + 1)) "$work/$src.log" | { grep -o 'x-deadline[:;] .*\(downtime-limit raised\|throttled to\|eased to\).*' || true; } |
        jq -R . | jq -sc .)
    record "$(jq -nc --arg k "$kind" --arg g "$g" --argjson cap "$cap" --argjson d "$d_ms" --argjson floor "$floor_ms" \
        --argjson plan "$plan" --argjson r "$r" --argjson b "$(blocked_ms "$dst")" --argjson acted "$acted" \
        --argjson seen "$(jq -c '{dirty: (.dirty | del(.blocks, .vcpus)), "link-bytes-per-second"}' <<<"$plan")" \
        --arg ok "$(case "$strat" in postcopy) echo "postcopy at once" ;; downtime|cheapest) echo "precopy + one pause" ;;
                    *) echo "precopy + auto-converge" ;; esac)" \
        '{kind: $k, guest: $g, cap: $cap, deadline_ms: $d, floor_ms: $floor,
          feasible: ([$plan.strategies[] | select((.strategy == "precopy" or .strategy == $ok) and .converges and ."total-ms" <= $d)] | length > 0),
          planned: ([$plan.strategies[] | select(.strategy == $ok)] | .[0] | {"total-ms", "downtime-ms", converges}),
          plan_facts: $seen, blocked_ms: $b, acted: $acted} + $r')"
    if [ "$(jq -r .status <<<"$r")" = completed ]; then stop "$src"; moved_to=$dst; else stop "$dst"; moved_to=$src; fi
}

# qemu_deadline NAME POLICY HOT STRIDE D_MS FLOOR_MS GUEST CAP: a QEMU 7.2 pair NAME-a -> NAME-b
# with the guest, cap and D, driven under POLICY (nova: post-copy permitted; nova-ac: auto-converge
# and a pause at D); recorded as kind "qemu" or "qemu-ac".
qemu_deadline() {
    local n=$1 policy=$2 hot=$3 stride=$4 d_ms=$5 floor_ms=$6 g=$7 cap=$8 kind=qemu caps p uri qb=0 paused
    [ "$policy" = nova-ac ] && kind=qemu-ac
    qemu_start "$n-a" -kernel "$PAYLOAD" -append "$(guest_args "$hot" "$stride")"
    warm "$n-a"
    qemu_start "$n-b" -incoming defer
    if [ "$kind" = qemu ]; then
        q "$n-b" 'migrate-set-capabilities {"capabilities":[{"capability":"postcopy-ram","state":true},{"capability":"postcopy-blocktime","state":true}]}' >/dev/null
        caps='[{"capability":"postcopy-ram","state":true}]'
    else
        caps='[{"capability":"auto-converge","state":true}]'
    fi
    q "$n-a" "migrate-set-capabilities {\"capabilities\":$caps}" >/dev/null
    q "$n-a" "migrate-set-parameters {\"max-bandwidth\": $((cap * 1048576)), \"max-postcopy-bandwidth\": $((cap * 1048576)), \"downtime-limit\": 50}" >/dev/null
    p=$(port) uri=tcp:127.0.0.1:$p
    q "$n-b" "migrate-incoming {\"uri\": \"$uri\"}" >/dev/null
    "$PY" "$DRIVE" "$work/$n-a.qmp" "$uri" "$policy" "$d_ms" "$work/$n-b.qmp" >"$work/$n.jsonl"
    for _ in $(seq 1 100); do
        [ "$(q "$n-b" query-migrate | jq -r .status)" = completed ] && break
        sleep 0.1
    done
    if [ "$kind" = qemu ]; then qb=$(blocked_ms "$n-b"); fi
    # Paused by the policy: from its stop to the migration's end (the destination resumed then).
    paused=$(jq -s '([.[] | select(.policy) | .policy[] | select(.[1] == "stop") | .[0]] | .[0]) as $t |
                    ([.[] | select(.q)] | last | .q) as $f |
                    if $t == null or $f.status != "completed" then 0 else ([$f["total-time"] - $t * 1000, 0] | max | round) end' "$work/$n.jsonl")
    record "$(jq -nc --arg k "$kind" --arg g "$g" --argjson cap "$cap" --argjson d "$d_ms" --argjson floor "$floor_ms" \
        --argjson r "$(summary_of "$work/$n.jsonl")" --argjson b $((qb + paused)) --argjson paused "$paused" \
        '{kind: $k, guest: $g, cap: $cap, deadline_ms: $d, floor_ms: $floor, blocked_ms: $b, paused_ms: $paused} + $r')"
    stop "$n-a" "$n-b"
}

for cap in ${caps//,/ }; do
    for g in $guests; do
        log "cap $cap MiB/s, guest $g"
        run_guest "$g" "$cap"
    done
done
mkdir -p "$out"
stamp=$(date +%Y%m%d-%H%M%S)
cp "$results" "$out/bench-deadline-$stamp.jsonl"
tar -C "$work" -cJf "$out/bench-deadline-$stamp-samples.tar.xz" $(cd "$work" && ls ./*.jsonl)  # every run's query-migrate samples
jq -s -r -f "$ROOT/scripts/lib/bench-deadline.jq" "$results" | tee "$out/bench-deadline-$stamp.txt"
log "results: $out/bench-deadline-$stamp.{jsonl,txt}"

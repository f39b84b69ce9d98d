# The measurements of scripts/bench-rdma.sh (sourced; expects $BUILD $work $addr $size $fill).
# Each run_* leaves $work/MODE-RUN.json: the figures and the query-migrate samples of one
# migration. Both VMMs are driven the same way: QMP through vmmctl --qmp.

VMM="$BUILD/bin/vmm" CTL="$BUILD/bin/vmmctl"
PAYLOAD="$BUILD/guest/pattern.elf"
# Fill with whole-page patterns (incompressible for both VMMs), then re-check 16 pages a step.
GUEST_ARGS="bytes=$fill words=512 check=16"
pids=()

cleanup() {  # the run's logs are kept under build/bench/failed-STAMP on failure, rdma-STAMP-logs on --keep-logs
    local rc=$? keep=
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    if [ "$rc" != 0 ]; then keep="failed-${stamp:-run}"
    elif [ "${keep_logs:-0}" = 1 ]; then keep="rdma-${stamp:-run}-logs"; fi
    if [ -n "$keep" ] && [ -n "${out:-}" ]; then
        cp -r "$work" "$out/$keep" 2>/dev/null && echo "logs of the run: $out/$keep" >&2
    fi
    rm -rf "$work"
}

port() { echo $(( 20000 + RANDOM % 20000 )); }

# run_mode MODE RUN: one migration in a subshell of its own, so that a failure (die) ends that
# mode alone: its processes are stopped, its logs kept in $out/failed-STAMP-MODE-RUN/, and
# $work/MODE-RUN.json says why (status "failed"). VMM_BENCH_FAIL=MODE makes that mode's source
# migrate to a port nobody listens on (to see a failed mode reported).
run_mode() {
    local mode=$1 run=$2 rc=0 err="$work/$1-$2.err"
    case "$mode" in
        vmm-*) isolated "$err" run_vmm "$mode" "$run" || rc=$? ;;
        *) isolated "$err" run_qemu "$mode" "$run" || rc=$? ;;
    esac
    if [ "$rc" = 0 ]; then cat "$err" >&2; return 0; fi
    tail -n 30 "$err" >&2
    local reason logs="$out/failed-$stamp-$mode-$run"
    reason=$(sed -n 's/^error: //p' "$err" | tail -1)
    mkdir -p "$logs" && cp -r "$work/$mode-$run"* "$logs/" 2>/dev/null
    jq -n --arg mode "$mode" --argjson run "$run" --arg reason "${reason:-exit status $rc}" --arg logs "$logs" \
        '{mode: $mode, run: $run, status: "failed", reason: $reason, logs: $logs}' >"$work/$mode-$run.json"
    return 1
}

# bench_pki: the credentials of the -auth modes (made once per run, for the RDMA address).
bench_pki() {
    [ -f "$work/pki/ca-cert.pem" ] || "$ROOT/scripts/make-test-pki.sh" "$work/pki" --server "$addr" >/dev/null ||
        die "make-test-pki.sh failed (needs certtool: apt-get install gnutls-bin)"
    echo "$work/pki"
}

wait_until() {  # wait_until SECONDS WHAT COMMAND...: polls COMMAND every 0.2 s
    local deadline=$(( $(date +%s) + $1 )) what=$2; shift 2
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$deadline" ] || die "timed out waiting for $what"
        sleep 0.2
    done
}

# chunk_of MODE: the x-rdma-chunk-size a -chunkSIZE mode sets ("2M", "1G"), or nothing.
chunk_of() { sed -n 's/.*-chunk\([0-9]*[KMG]\).*/\1/p' <<<"$1"; }

# message_bytes MODE: the size of ib_write_bw's writes beside that mode: its chunk size, else
# 1 MiB, the default chunk; at most the largest power of two in an eighth of what the guest
# filled (ib_write_bw moves as many bytes as the guest filled, and wants at least 5 writes).
message_bytes() {
    local c; c=$(chunk_of "$1")
    [ -n "$c" ] || { echo 1048576; return; }
    local b cap=1 f; b=$(numfmt --from=iec "$c") f=$(numfmt --from=iec "$fill")
    while [ $(( cap * 2 )) -le $(( f / 8 )) ]; do cap=$(( cap * 2 )); done
    echo $(( b < cap ? b : cap ))
}

# ib_write_bw server and client on DEVICE: as many 1 MiB writes (or MESSAGE-BYTES) as the guest has filled
# (iterations, not -D: its duration mode counts 0 iterations under TCG); prints MB/s (1e6 bytes).
# (ib_ceiling DEVICE ADDR [busy|""] [MESSAGE-BYTES]). With a third argument "busy", one CPU-bound process runs beside it, as the source guest's
# vCPU does during every migration measured here (the pattern guest never stops checking):
# with SoftRoCE the kernel moves every byte on the CPU, so the ceiling depends on the CPU left.
ib_ceiling() {
    local bw attempt
    for attempt in 1 2 3; do  # ib_write_bw under TCG sometimes times itself wrong and says 0
        bw=$(ib_write_bw_once "$@")
        [ -n "$bw" ] && awk -v b="$bw" 'BEGIN { exit !(b > 0) }' && { echo "$bw"; return; }
        echo "   ib_write_bw reported no bandwidth (attempt $attempt): $(grep -m1 -i "r^2\|warn" "$work/ib-client.log" || true)" >&2
    done
    cat "$work/ib-client.log" >&2
    die "ib_write_bw reported no bandwidth three times"
}

ib_write_bw_once() {
    local bytes=${4:-1048576} p n busy=; p=$(port) n=$(( $(numfmt --from=iec "$fill") / ${4:-1048576} ))
    [ "$n" -ge 5 ] || n=5
    if [ "${3:-}" = busy ]; then
        bash -c 'while :; do :; done' >/dev/null 2>&1 & busy=$!
    fi
    ib_write_bw -d "$1" -s "$bytes" -n "$n" -F -p "$p" >"$work/ib-server.log" 2>&1 &
    local server=$!; pids+=("$server")
    sleep 1
    local rc=1 try
    for try in 1 2 3 4 5; do  # under TCG the server can take more than a second to listen
        rc=0
        ib_write_bw -d "$1" -s "$bytes" -n "$n" -F -p "$p" "$2" >"$work/ib-client.log" 2>&1 || rc=$?
        grep -q "Couldn't connect" "$work/ib-client.log" || break
        sleep 2
    done
    [ -z "$busy" ] || kill "$busy" 2>/dev/null || true
    kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true
    [ "$rc" = 0 ] || { cat "$work/ib-client.log" "$work/ib-server.log" >&2; die "ib_write_bw failed"; }
    # The result line: bytes, iterations, peak MiB/s, average MiB/s, Mpps. MiB/s to two places
    # (--report_gbits would give Gbit/s to two places: steps of 1.25 MB/s, 5-8 % here).
    awk -v s="$bytes" '$1 == s && $2 > 0 && NF >= 5 { printf "%.2f\n", $4 * 1.048576 }' "$work/ib-client.log" | tail -1
}

# summarize MODE RUN SAMPLES GUEST_PAUSE_MS ROUNDS_JSON: one migration's figures as JSON.
summarize() {
    jq -s --arg mode "$1" --argjson run "$2" --arg pause "$4" --argjson rounds "$5" '
        (map(select(.ram != null))) as $s | (map(select(.status == "completed")) | last) as $f |
        ($f["total-time"] // 0) as $total | ($f["setup-time"] // 0) as $setup |
        # The transfer window: total time less setup. QEMU connects RDMA inside its migrate
        # command, after its total-time clock starts and before its setup-time clock does: for
        # QEMU the time that command took to answer is taken off too. Ours counts both from the
        # command and connects during setup.
        ($f["x-command-seconds"] // 0) as $cmd |
        (($total - $setup) / 1000 - (if $mode | startswith("qemu-") then $cmd else 0 end)) as $window |
        def parts_text: map("\(.name) \(.ms * 10 | round / 10)" + (if .parts then " (" + (.parts | parts_text) + ")" else "" end))
                        | join(", ");
        { mode: $mode, run: $run, status: $f.status,
          total_ms: $f["total-time"], setup_ms: $f["setup-time"], command_s: $cmd, downtime_ms: $f.downtime,
          # From the migrate command to completion, what a person timing it sees: both VMMs
          # count total-time from their command (QEMU records it a moment late: then the watch).
          end_to_end_ms: (if $total > 0 then $total else (($cmd + ($s | last | .t)) * 1000 | round) end),
          # Setup as a person sees it: QEMU connects inside its migrate command, before its
          # setup-time clock starts; ours counts the command in setup.
          setup_seen_ms: (if $mode | startswith("qemu-") then $setup + ($cmd * 1000 | round) else $setup end),
          setup_parts: (if $f["x-setup-parts"] then $f["x-setup-parts"] | parts_text else null end),
          setup_parts_detail: $f["x-setup-parts"],
          downtime_parts: $f["x-downtime-parts"], handover_estimate_ms: $f["x-handover-estimate-ms"],
          transferred: $f.ram.transferred,
          throughput_mbs: (if $window > 0 then ($f.ram.transferred / $window / 1e5 | round) / 10
                           else null end),  # a VMM that reports no times gets no figure, not a wrong one
          # The guest moved per second: its RAM over the same time. A VMM that writes zero or
          # never-touched memory (QEMU in pin-all mode) sends more bytes for the same guest.
          ram_mbs: (if $window > 0 then ($f.ram.total / $window / 1e5 | round) / 10 else null end),
          # The bulk round alone (round 0 of our round log: every populated page, ended when
          # all of it has arrived), as the issue states the ceiling target; QEMU keeps no log.
          bulk_mbs: (if ($rounds | length) > 0 and $rounds[0].seconds > 0
                     then ($rounds[0].bytes / $rounds[0].seconds / 1e5 | round) / 10 else null end),
          guest_pause_ms: (if $pause == "" then null else ($pause | tonumber) end),
          # Seconds since the migrate command: the watch starts once the command has answered.
          samples: ($s | map([.t + $cmd, .ram.transferred, (.ram["x-in-flight"] // 0)])),
          rounds: $rounds }' "$3"
}

# migrate_and_watch QMP-SOCKET URI SAMPLES [SETUP-COMMAND...]: migrates, polling query-migrate
# every $watch_ms (200 ms; an -idle mode sets 1000, see run_vmm).
migrate_and_watch() {
    local sock=$1 uri=$2 samples=$3; shift 3
    local rc=0
    [ "${VMM_BENCH_FAIL:-}" != "${mode:-}" ] || uri="${uri%:*}:$(port)"  # nobody listens there
    "$CTL" --qmp "unix:$sock" "$@" "migrate {\"uri\": \"$uri\"}" --watch-migration "${watch_ms:-200}" >"$samples.raw" || rc=$?
    tail -n +$(( $# + 2 )) "$samples.raw" >"$samples"  # the watch lines only
    return "$rc"  # a failed or cancelled migration, or a lost monitor, fails the run
}

# cpu_ticks PID [VCPU-TID...]: "ALL VCPUS", the CPU (clock ticks, user + system) process PID has
# used so far: all of it (threads that ended included) and its vCPU threads' (the TIDs given, as
# QEMU's query-cpus-fast names them; else ours, which name themselves vcpuN). The difference is
# what the VMM itself spent on the migration (on SoftRoCE that includes the kernel's RDMA work
# done in the VMM's own threads).
cpu_ticks() {
    local pid=$1 all vcpus=0 t c s; shift
    local tids=("$@")
    if [ ${#tids[@]} = 0 ]; then
        for t in /proc/"$pid"/task/*; do
            read -r c <"$t/comm" 2>/dev/null || continue
            case "$c" in vcpu[0-9]*) tids+=("${t##*/}") ;; esac
        done
    fi
    s=$(<"/proc/$pid/stat") || return 1
    set -- ${s##*) }; all=$(( ${12} + ${13} ))
    for t in "${tids[@]}"; do
        s=$(<"/proc/$pid/task/$t/stat") || continue
        set -- ${s##*) }; vcpus=$(( vcpus + ${12} + ${13} ))
    done
    echo "$all $vcpus"
}

# qemu_vcpu_tids QMP-SOCKET: the thread ids of a QEMU's vCPUs.
qemu_vcpu_tids() {
    "$CTL" --qmp "unix:$1" query-cpus-fast | jq -r '.[]["thread-id"]'
}

# cpu_used BEFORE-S BEFORE-D AFTER-S AFTER-D: the VMMs' CPU beyond their vCPUs between the two
# readings of cpu_ticks, in seconds, as JSON {source, destination}.
cpu_used() {
    local hz; hz=$(getconf CLK_TCK)
    set -- $1 $2 $3 $4  # all vcpus, for before-source, before-destination, after-source, after-destination
    jq -n --argjson hz "$hz" --argjson s "$(( ($5 - $1) - ($6 - $2) ))" --argjson d "$(( ($7 - $3) - ($8 - $4) ))" \
        '{source: ($s / $hz), destination: ($d / $hz)}'
}

run_vmm() {  # run_vmm MODE RUN
    local mode=$1 name="$1-$2" p; p=$(port)
    local uri="rdma:$addr:$p" setup=()
    case "$mode" in vmm-tcp*) uri="tcp:$addr:$p" ;; esac
    # -prealloc: the destination populates its RAM at start (--mem-prealloc), before the
    # migration, as ib_write_bw has its buffer before it measures: dynamic registration then
    # pins pages that exist instead of faulting in and zeroing each chunk inside the bulk round.
    local dest=() incoming=$uri
    case "$mode" in *-prealloc*) dest=(--mem-prealloc) ;; esac
    # -auth: tls-creds at both ends (an authenticated migration: the control channel in TLS, every
    # page with its MAC). rdma-pin-all: the capability at both ends too, as libvirt sets it (the
    # destination then pins its RAM while it waits; QEMU's pins when the source asks). An rdma:
    # destination reads its settings when it starts listening, so it waits with --incoming defer
    # for them, as a person would type it.
    local dest_setup=()
    case "$mode" in vmm-rdma-pin-all*) dest_setup+=("migrate_set_capability rdma-pin-all on") ;; esac
    case "$mode" in *-auth*) dest_setup+=("migrate_set_parameter tls-creds $(bench_pki)") ;; esac
    case "$mode" in *-postcopy*) dest_setup+=("migrate_set_capability postcopy-ram on") ;; esac
    [ ${#dest_setup[@]} -gt 0 ] && incoming=defer
    # Both sides trace their protocol (a line per control message, registration and write):
    # with --keep-logs, when each message left and arrived can be read off the two logs.
    # BENCH_RDMA_TRACE=0 turns it off where the trace would be measured (a line per fault).
    VMM_RDMA_TRACE=${BENCH_RDMA_TRACE:-1} "$VMM" -m "$size" "${dest[@]}" --incoming "$incoming" --monitor "unix:$work/$name-d.sock" --serial none >"$work/$name-d.log" 2>&1 &
    local dpid=$!; pids+=("$dpid")
    # An -idle mode runs the idle payload over RAM the host filled with incompressible data:
    # the spec's bulk-round scenario ("all of memory in active use and the VM itself is
    # completely idle"); its vCPU sleeps, so the transport has the CPU.
    local guest=(--guest "$PAYLOAD" --append "$GUEST_ARGS")
    case "$mode" in *-idle) guest=(--guest idle --prefill "$fill") ;; esac
    # Each round's registration work is read from the source's trace below.
    VMM_RDMA_TRACE=${BENCH_RDMA_TRACE:-1} "$VMM" -m "$size" "${guest[@]}" --monitor "unix:$work/$name-s.sock" \
        --qmp "unix:$work/$name-sq.sock" --serial none >"$work/$name-s.log" 2>&1 &
    local spid=$!; pids+=("$spid")
    # The destination listens before its monitor answers: once it answers, it can be migrated to
    # (with --mem-prealloc it first populates all its RAM, which can outlast the source's start).
    wait_until 60 "the destination vmm" "$CTL" "unix:$work/$name-d.sock" "info status"
    if [ ${#dest_setup[@]} -gt 0 ]; then
        "$CTL" "unix:$work/$name-d.sock" "${dest_setup[@]}" "migrate_incoming $uri" >/dev/null ||
            die "$mode: the destination did not take ${dest_setup[*]}; migrate_incoming"
    fi
    local baseline=
    case "$mode" in
        *-idle) wait_until 60 "the source vmm" sh -c "'$CTL' unix:$work/$name-s.sock 'info status' | grep -q running" ;;
        *)  wait_until 300 "the guest to fill its memory" sh -c "'$CTL' unix:$work/$name-s.sock 'info guest' | grep -q '^results: [1-9]'"
            # The longest gap between the guest's steps before migrating: under TCG, the scheduler
            # alone makes gaps this long, and a migration's load makes them longer.
            baseline=$("$CTL" "unix:$work/$name-s.sock" "info guest" | sed -n 's/^longest pause observed: \([0-9.]*\) ms$/\1/p') ;;
    esac
    case "$mode" in
        vmm-rdma-pin-all*) setup+=('migrate-set-capabilities {"capabilities": [{"capability": "rdma-pin-all", "state": true}]}') ;;
        vmm-rdma-2-channels*) setup+=('migrate-set-parameters {"rdma-channels": 2}') ;;
        vmm-rdma-*-chunk*) setup+=("migrate-set-parameters {\"x-rdma-chunk-size\": $(numfmt --from=iec "$(chunk_of "$mode")")}") ;;
    esac
    case "$mode" in
        vmm-tcp-multifd*) setup+=('migrate-set-capabilities {"capabilities": [{"capability": "multifd", "state": true}]}') ;;
    esac
    # -postcopy: postcopy-ram at both ends, the switch after the bulk round (whose throughput is
    # then the one before the switch).
    case "$mode" in
        *-postcopy*) setup+=('migrate-set-capabilities {"capabilities": [{"capability": "postcopy-ram", "state": true}]}'
                            'migrate-set-parameters {"x-postcopy-after-rounds": 1}') ;;
    esac
    case "$mode" in  # -verify: end-to-end RAM verification on (what it costs: beside the same mode without)
        *-verify*) setup+=('migrate-set-capabilities {"capabilities": [{"capability": "verify-ram", "state": true}]}') ;;
        *-auth*) setup+=("migrate-set-parameters {\"tls-creds\": \"$(bench_pki)\"}") ;;
    esac
    stopped_setup
    setup+=('migrate-set-parameters {"downtime-limit": 300, "max-bandwidth": 0}')
    # An -idle mode is compared with ib_write_bw, which runs with nothing beside it: no memory
    # sampler (one smaps sample costs ~21 ms of the nested VM's one emulated CPU, so two
    # samplers at 4 Hz took ~17 % of it) and progress polled once a second. The other modes
    # give the memory figures.
    local watch_ms=200
    case "$mode" in *-idle) watch_ms=1000 ;; *) watch_memory "$spid" "$dpid" "$name" ;; esac
    local cpu_s cpu_d cpu; cpu_s=$(cpu_ticks "$spid") cpu_d=$(cpu_ticks "$dpid")
    migrate_and_watch "$work/$name-sq.sock" "$uri" "$work/$name.samples" "${setup[@]}" ||
        { cat "$work/$name-s.log" "$work/$name-d.log" >&2
          die "$mode: the migration did not complete: $(sed -n 's/^vmm: error: //p' "$work/$name-s.log" | tail -1)"; }
    cpu=$(cpu_used "$cpu_s" "$cpu_d" "$(cpu_ticks "$spid")" "$(cpu_ticks "$dpid")")
    case "$mode" in *-idle) ;; *) unwatch_memory ;; esac
    sleep 1.5  # the destination guest runs on and reports the pause it lived through
    local pause stall rounds info verified late
    info=$("$CTL" "unix:$work/$name-d.sock" "info migrate") ||
        { tail -20 "$work/$name-d.log" >&2; die "$mode: the destination vmm is gone after the migration completed"; }
    pause=$(echo "$info" | sed -n 's/^guest-observed pause: \([0-9.]*\) ms$/\1/p')
    stall=$(echo "$info" | sed -n "s/^guest's longest stall before the switchover: \([0-9.]*\) ms$/\1/p")
    rounds=$(tail -1 "$work/$name.samples" | jq -c '."x-round-log" // []')
    # verify-ram: what the destination checked, and how much of it only once its round had ended
    verified=$(echo "$info" | sed -n 's/^verified ram: \([0-9]*\) kbytes.*/\1/p')
    late=$(echo "$info" | sed -n 's/^verified after its round ended: \([0-9]*\) kbytes.*/\1/p')
    local dparts; dparts=$(echo "$info" | sed -n 's/^setup parts: \(.*\) ms$/\1/p')
    "$CTL" "unix:$work/$name-s.sock" quit >/dev/null || true
    "$CTL" "unix:$work/$name-d.sock" quit >/dev/null || true
    summarize "$mode" "$2" "$work/$name.samples" "$pause" "$rounds" |
        jq --arg b "$baseline" --arg stall "$stall" --argjson src "$(cat "$work/$name-s.rss" 2>/dev/null || echo null)" \
           --argjson dst "$(cat "$work/$name-d.rss" 2>/dev/null || echo null)" --argjson work "$(round_work "$work/$name-s.log")" \
           --argjson cpu "$cpu" --arg verified "$verified" --arg late "$late" --arg dparts "$dparts" \
           "$jq_cpu"'.guest_gap_before_ms = ($b | tonumber? // null) | .guest_stall_ms = ($stall | tonumber? // null) | .overhead_kib = {source: $src, destination: $dst}
            | .registration = $work | with_cpu($cpu)
            | .verified_kib = ($verified | tonumber? // null) | .verified_after_round_kib = ($late | tonumber? // null)
            | .destination_setup_parts = (if $dparts == "" then null else $dparts end)' >"$work/$name.json"
}

# round_work SOURCE-LOG: the plugin's per-round registration work (traced at each round's
# end) as a JSON array; empty for TCP.
round_work() {
    sed -n 's/.*source: round \([0-9]*\) work: \([0-9]*\) chunk writes, \([0-9]*\) remote registrations, \([0-9]*\) remote unregistrations, \([0-9]*\) local registrations, \([0-9]*\) local unregistrations; \([0-9]*\) chunks registered now of \([0-9]*\) in RAM.*/\1 \2 \3 \4 \5 \6 \7 \8/p' "$1" |
        jq -R -s -c 'split("\n") | map(select(length > 0) | split(" ") | map(tonumber) |
            {round: .[0], writes: .[1], remote_reg: .[2], remote_unreg: .[3], local_reg: .[4], local_unreg: .[5],
             registered_now: .[6], ram_chunks: .[7]})'
}

# watch_memory SOURCE-PID DESTINATION-PID NAME: sample both VMMs' memory beyond guest RAM into
# $work/NAME-{s,d}.rss until unwatch_memory; the same for both VMMs, 4 times a second (a
# migration here lasts seconds, and every sample costs the CPU that is SoftRoCE's link).
watch_memory() {
    local ram_kib=$(( $(numfmt --from=iec "$size") / 1024 ))
    sample_overhead "$1" "$ram_kib" "$work/$3-s.rss" 250 & watchers=($!)
    sample_overhead "$2" "$ram_kib" "$work/$3-d.rss" 250 & watchers+=($!)
    pids+=("${watchers[@]}")
}
unwatch_memory() {
    kill "${watchers[@]}" 2>/dev/null || true; wait "${watchers[@]}" 2>/dev/null || true
}

# A mode ending in -stopped pauses the guest before migrating (both VMMs take "stop"), so
# every round after the bulk one is empty and no vCPU competes with the transport for the
# CPU: with SoftRoCE the CPU is the link, so this measures the transport itself against
# ib_write_bw. Appends to the caller's setup list.
stopped_setup() {
    case "$mode" in *-stopped) setup+=('stop') ;; esac
}

run_qemu() {  # run_qemu MODE RUN
    local mode=$1 name="$1-$2" p; p=$(port)
    local uri="rdma:$addr:$p" setup=()
    case "$mode" in qemu-tcp*) uri="tcp:$addr:$p" ;; esac  # QEMU's own TCP migration, beside our vmm-tcp
    local common=(qemu-system-x86_64 -accel kvm -cpu host -m "$size" -nodefaults -no-user-config -display none
                  -kernel "$PAYLOAD" -append "$GUEST_ARGS")
    # qemu-tcp-multifd: multifd (2 channels, QEMU's default) at both ends, the destination's set
    # before it listens (-incoming defer), as QEMU asks.
    local incoming=$uri
    case "$mode" in qemu-tcp-multifd*) incoming=defer ;; esac
    "${common[@]}" -serial "file:$work/$name-d.ser" -qmp "unix:$work/$name-dq.sock,server=on,wait=off" \
        -incoming "$incoming" >"$work/$name-d.log" 2>&1 &
    local dpid=$!; pids+=("$dpid")
    "${common[@]}" -serial "file:$work/$name-s.ser" -qmp "unix:$work/$name-sq.sock,server=on,wait=off" \
        >"$work/$name-s.log" 2>&1 &
    local spid=$!; pids+=("$spid")
    wait_until 300 "the QEMU guest to fill its memory" grep -q "pattern: pass 1," "$work/$name-s.ser"
    # QEMU sets up -incoming during start-up, before its monitor answers.
    wait_until 30 "the QEMU destination" "$CTL" --qmp "unix:$work/$name-dq.sock" query-status
    local multifd='{"capabilities": [{"capability": "multifd", "state": true}]}'
    case "$mode" in
        qemu-rdma-pin-all*) setup+=('migrate-set-capabilities {"capabilities": [{"capability": "rdma-pin-all", "state": true}]}') ;;
        qemu-tcp-multifd*)
            setup+=("migrate-set-capabilities $multifd")
            "$CTL" --qmp "unix:$work/$name-dq.sock" "migrate-set-capabilities $multifd" \
                "migrate-incoming {\"uri\": \"$uri\"}" >/dev/null ||
                die "$mode: the QEMU destination did not take multifd and migrate-incoming" ;;
    esac
    stopped_setup
    # QEMU's default max-bandwidth is 128 MiB/s: lift it (ours has no limit by default).
    setup+=('migrate-set-parameters {"downtime-limit": 300, "max-bandwidth": 107374182400}')
    local stids dtids cpu_s cpu_d cpu
    stids=$(qemu_vcpu_tids "$work/$name-sq.sock") dtids=$(qemu_vcpu_tids "$work/$name-dq.sock")
    watch_memory "$spid" "$dpid" "$name"
    cpu_s=$(cpu_ticks "$spid" $stids) cpu_d=$(cpu_ticks "$dpid" $dtids)
    migrate_and_watch "$work/$name-sq.sock" "$uri" "$work/$name.samples" "${setup[@]}" ||
        { cat "$work/$name-s.log" "$work/$name-d.log" >&2
          die "$mode: QEMU's migration did not complete: $(grep -v '^$' "$work/$name.samples.raw" 2>/dev/null | tail -1 | cut -c1-300)"; }
    cpu=$(cpu_used "$cpu_s" "$cpu_d" "$(cpu_ticks "$spid" $stids)" "$(cpu_ticks "$dpid" $dtids)")
    unwatch_memory
    "$CTL" --qmp "unix:$work/$name-sq.sock" quit >/dev/null 2>&1 || true
    "$CTL" --qmp "unix:$work/$name-dq.sock" quit >/dev/null 2>&1 || true
    summarize "$mode" "$2" "$work/$name.samples" "" "[]" |
        jq --argjson src "$(cat "$work/$name-s.rss" 2>/dev/null || echo null)" \
           --argjson dst "$(cat "$work/$name-d.rss" 2>/dev/null || echo null)" --argjson cpu "$cpu" \
           "$jq_cpu"'.overhead_kib = {source: $src, destination: $dst} | with_cpu($cpu)' >"$work/$name.json"
}

# with_cpu(C): one migration's figures with the VMMs' CPU beyond their vCPUs (cpu_used), and
# that per GB sent (source and destination together), to two places.
jq_cpu='def with_cpu($c): .cpu_s = $c | .cpu_s_per_gb = (if (.transferred // 0) > 0
    then (($c.source + $c.destination) / (.transferred / 1e9) * 100 | round) / 100 else null end);'

# Rounds a number to 1/d (medians of an even count are means: printed to the figures' own
# precision); anything else passes through. Prefixed to the report's jq programs.
jq_round='def r(d): if type == "number" then (. * d | round) / d else . end;'

# report CEILING OUT.json BUSY-CEILING: the table, the ratios, and every figure as JSON.
report() {
    jq -s --argjson ceiling "$1" --argjson busy "$3" --arg size "$size" --arg fill "$fill" --arg date "$(date -u +%FT%TZ)" \
        --arg machine "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores" \
        --arg where "$([ -n "${VMM_BENCH_INSIDE:-}" ] && echo 'SoftRoCE nested VM (QEMU TCG)' || echo 'RDMA device')" '
        def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
        (map(select(.status != "failed")) | group_by(.mode) | map({key: .[0].mode, value: {
            throughput_mbs: (map(.throughput_mbs | select(. != null)) | median),
            ram_mbs: (map(.ram_mbs | select(. != null)) | median),
            ratio_to_ceiling: (if $ceiling > 0 then ((map(.throughput_mbs | select(. != null)) | median) / $ceiling * 100 | round) / 100
                               else null end),
            ratio_to_ceiling_around: (map(.ratio_to_ceiling_around | select(. != null)) | median),
            ram_ratio_to_ceiling_around: (map(.ram_ratio_to_ceiling_around | select(. != null)) | median),
            bulk_mbs: (map(.bulk_mbs | select(. != null)) | median),
            bulk_ratio_to_ceiling_around: (map(.bulk_ratio_to_ceiling_around | select(. != null)) | median),
            ratio_to_busy_ceiling: (if $busy > 0 then ((map(.throughput_mbs | select(. != null)) | median) / $busy * 100 | round) / 100
                                    else null end),
            downtime_ms: (map(.downtime_ms) | median),
            guest_pause_ms: (map(.guest_pause_ms) | if all(. == null) then null else map(select(. != null)) | median end),
            guest_stall_ms: (map(.guest_stall_ms) | if all(. == null) then null else map(select(. != null)) | median end),
            guest_gap_before_ms: (map(.guest_gap_before_ms) | if all(. == null) then null else map(select(. != null)) | median end),
            total_ms: (map(.total_ms) | median),
            end_to_end_ms: (map(.end_to_end_ms | select(. != null)) | median),
            setup_ms: (map(.setup_ms | select(. != null)) | median),
            command_ms: (map(.command_s * 1000 | round) | median),
            setup_seen_ms: (map(.setup_seen_ms | select(. != null)) | median),
            overhead_kib_max: (map(.overhead_kib // {}) | {source: (map(.source // empty) | max),
                                                          destination: (map(.destination // empty) | max)}),
            cpu_s_per_gb: (map(.cpu_s_per_gb | select(. != null)) | median),
            cpu_s: {source: (map(.cpu_s.source // empty) | median), destination: (map(.cpu_s.destination // empty) | median)},
            verified_kib: (map(.verified_kib // empty) | median),
            verified_after_round_kib: (map(.verified_after_round_kib // empty) | median),
            registration_run1: (map(select(.run == 1)) | .[0].registration // null)}}) | from_entries) as $m |
        # Ours over QEMU in figure k of mode a and mode b, to two places.
        def over(a; b; k): if $m[a][k] and $m[b][k] then (($m[a][k] / $m[b][k] * 100 | round) / 100) else null end;
        def vs(k): { dynamic: over("vmm-rdma-dynamic"; "qemu-rdma-dynamic"; k),
                     pin_all: over("vmm-rdma-pin-all"; "qemu-rdma-pin-all"; k),
                     dynamic_stopped: over("vmm-rdma-dynamic-stopped"; "qemu-rdma-dynamic-stopped"; k),
                     pin_all_stopped: over("vmm-rdma-pin-all-stopped"; "qemu-rdma-pin-all-stopped"; k),
                     tcp: over("vmm-tcp"; "qemu-tcp"; k), tcp_stopped: over("vmm-tcp-stopped"; "qemu-tcp-stopped"; k) };
        # QEMU over ours in figure k (a time: above 1, ours takes less), paired within each run
        # (the two migrations ran one after the other), the median of those, to two places.
        . as $runs |
        def paired(a; b; k): [ $runs | map(select(.status != "failed")) | group_by(.run)[]
            | (map(select(.mode == a))[0][k]) as $x | (map(select(.mode == b))[0][k]) as $y
            | select($x != null and $y != null and $y > 0) | $x / $y ] | median | if . then (. * 100 | round) / 100 else null end;
        def under(k): { dynamic: paired("qemu-rdma-dynamic"; "vmm-rdma-dynamic"; k),
                        pin_all: paired("qemu-rdma-pin-all"; "vmm-rdma-pin-all"; k), tcp: paired("qemu-tcp"; "vmm-tcp"; k) };
        { date: $date, machine: $machine, where: $where, guest_ram: $size, guest_filled: $fill,
          ceiling_ib_write_bw_mbs: $ceiling, ceiling_ib_write_bw_busy_core_mbs: $busy, modes: $m,
          failed: map(select(.status == "failed") | {mode, run, reason, logs}),
          # The headline: from the migrate command to completion, QEMU'"'"'s time over ours (medians).
          qemu_time_over_ours_end_to_end: under("end_to_end_ms"),
          # Setup as each VMM reports it, plus for QEMU its migrate command, inside which it
          # connects (and under rdma-pin-all pins its own RAM) before its setup-time clock starts.
          setup_ms: { dynamic: {ours: $m["vmm-rdma-dynamic"].setup_seen_ms, qemu: $m["qemu-rdma-dynamic"].setup_seen_ms},
                      pin_all: {ours: $m["vmm-rdma-pin-all"].setup_seen_ms, qemu: $m["qemu-rdma-pin-all"].setup_seen_ms},
                      tcp: {ours: $m["vmm-tcp"].setup_seen_ms, qemu: $m["qemu-tcp"].setup_seen_ms} },
          # The transfer window alone (total less setup, and for QEMU less its command): ours over QEMU.
          ours_over_qemu: vs("throughput_mbs"),
          ours_over_qemu_by_guest_ram: vs("ram_mbs"),
          # Paired: each VMM first divided by the ib_write_bw measured around its own
          # migration, so the machine speed of that moment cancels out (it swings by 1.5x within a run).
          ours_over_qemu_paired: (vs("ratio_to_ceiling_around") as $b | vs("ram_ratio_to_ceiling_around") as $r |
                                  { dynamic: $b.dynamic, pin_all: $b.pin_all, tcp: $b.tcp,
                                    dynamic_by_guest_ram: $r.dynamic, pin_all_by_guest_ram: $r.pin_all,
                                    tcp_by_guest_ram: $r.tcp }),
          # CPU is a cost: QEMU over ours, so above 1 means ours spends less per GB.
          qemu_cpu_over_ours: { dynamic: over("qemu-rdma-dynamic"; "vmm-rdma-dynamic"; "cpu_s_per_gb"),
                                pin_all: over("qemu-rdma-pin-all"; "vmm-rdma-pin-all"; "cpu_s_per_gb") },
          # What verify-ram costs: each -verify mode over the same mode without it, both first
          # divided by the ib_write_bw measured around their own migrations.
          verify_cost: ($m | to_entries | map(select(.key | test("-verify")) | .key as $k | ($k | sub("-verify"; "")) as $base |
                                              select($m[$base] != null) |
                                              {key: $base, value: over($k; $base; "ratio_to_ceiling_around")}) | from_entries),
          # What authentication costs beyond verify-ram: each -auth mode over its
          # -verify twin (both sum every page; -auth keys the sums and runs the control channel in TLS).
          auth_cost: ($m | to_entries | map(select(.key | test("-auth")) | .key as $k | ($k | sub("-auth"; "-verify")) as $v |
                                            select($m[$v] != null) |
                                            {key: ($k | sub("-auth"; "")), value: over($k; $v; "ratio_to_ceiling_around")}) | from_entries),
          runs: . }' "$work"/*-[0-9]*.json >"$2"
    local f='%-31s %7s %9s %8s %6s %6s %9s %14s %11s %10s %11s\n'
    printf "\n\033[1m$f\033[0m" mode "MB/s" "/ceiling" "/around" "/busy" "bulk" "bulk/ar" "downtime (ms)" "guest (ms)" \
        "stall (ms)" "before (ms)"
    printf "$f" "ib_write_bw" "$1" "1.00" - - - - - - - -
    printf "$f" "ib_write_bw, busy core" "$3" - - "1.00" - - - - - -
    jq -r "$jq_round"'
           .modes | to_entries[] | [.key, (.value.throughput_mbs | r(10)), (.value.ratio_to_ceiling // "-" | r(100)),
           (.value.ratio_to_ceiling_around // "-" | r(100)), (.value.ratio_to_busy_ceiling // "-"), (.value.bulk_mbs // "-" | r(10)),
           (.value.bulk_ratio_to_ceiling_around // "-" | r(100)), (.value.downtime_ms | r(10)),
           (.value.guest_pause_ms // "-" | r(10)), (.value.guest_stall_ms // "-" | r(10)), (.value.guest_gap_before_ms // "-" | r(10))] | @tsv' "$2" |
        while IFS=$'\t' read -r m t r rp rb bk bb d g st b; do
            printf "$f" "$m" "$t" "$r" "$rp" "$rb" "$bk" "$bb" "$d" "$g" "$st" "$b"
        done
    jq -r '.modes as $m | .verify_cost // {} | to_entries[] | .key as $base |
        ($m | to_entries | map(select((.key | test("-verify")) and (.key | sub("-verify"; "")) == $base)) | .[0].value) as $v |
        "verify-ram, \(.key): throughput with it / without it (each against ib_write_bw around it): \(.value // "-")" +
        (if $v.verified_kib then "; checked \($v.verified_kib / 1024 | floor) MiB, \(($v.verified_after_round_kib // 0) / 1024 | floor) MiB of it after its round ended (median)" else "" end)' "$2"
    jq -r '.auth_cost // {} | to_entries[] |
        "authenticated (tls-creds), \(.key): throughput / verify-ram'"'"'s (each against ib_write_bw around it): \(.value // "-")"' "$2"
    echo "MB/s: RAM transferred over the whole migration after setup (every round and the switchover)."
    echo "bulk: the bulk round alone, from our round log (QEMU reports none); bulk/ar: that against the"
    echo "ib_write_bw measured around the migration, the issue's >= 0.9 target."
    echo "/around: against the mean of ib_write_bw measured just before and just after that migration"
    echo "(the median of those ratios)."
    echo "From the pattern guest's clock reads: guest, the pause it lived through across the switchover;"
    echo "stall, its longest gap between two steps while the migration ran before that; before, the same"
    echo "before migrating (the scheduler's share). QEMU's guest cannot report (no control device)."
    echo "/busy: against ib_write_bw run beside one CPU-bound process, as the source guest's vCPU runs beside"
    echo "every migration here (SoftRoCE moves bytes on the CPU; an RDMA NIC would not care)."
    echo
    echo "memory beyond guest RAM (max over runs, target < 64 MiB per side), and registration work per round (run 1):"
    jq -r '.modes | to_entries[] | .value as $v |
        ($v.registration_run1 // []) as $r | ($r | map(select(.round > 0))) as $d |
        def mib(k): if k == null then "not sampled" else "\(k / 1024 | floor) MiB" end;
        "  \(.key): source \(mib($v.overhead_kib_max.source)), destination \(mib($v.overhead_kib_max.destination))" +
        (if ($r | length) == 0 then "" else
         "\n      bulk round: \($r[0].writes) chunk writes, \($r[0].remote_reg) remote + \($r[0].local_reg) local registrations" +
         " (RAM: \($r[0].ram_chunks) chunks); \($d | length) dirty round(s): at most \($d | map(.writes) | max // 0) writes and" +
         " \($d | map(.remote_reg + .local_reg) | max // 0) registrations in one" end)' "$2"
    echo "CPU beyond the guest's vCPUs while migrating, per GB sent (source + destination; median over runs):"
    jq -r "$jq_round"'.modes | to_entries[] | select(.value.cpu_s_per_gb != null) |
        "  \(.key): \(.value.cpu_s_per_gb | r(100)) s/GB (source \(.value.cpu_s.source | r(100)) s, destination \(.value.cpu_s.destination | r(100)) s)"' "$2"
    jq -r '.qemu_cpu_over_ours | "  QEMU / ours: dynamic \(.dynamic // "-"), pin-all \(.pin_all // "-") (above 1: ours spends less; on SoftRoCE this",
           "  includes the kernel'"'"'s RDMA work done in the VMMs'"'"' own threads, which an RDMA NIC does itself)"' "$2"
    jq -r "$jq_round"'
           .modes | "bulk round / ib_write_bw around it, idle guest with all its RAM in use (the spec'"'"'s bulk-round",
           "scenario; target >= 0.9): dynamic \(.["vmm-rdma-dynamic-idle"].bulk_ratio_to_ceiling_around // "-" | r(100)), pin-all \(.["vmm-rdma-pin-all-idle"].bulk_ratio_to_ceiling_around // "-" | r(100)),",
           "dynamic with a --mem-prealloc destination \(.["vmm-rdma-dynamic-prealloc-idle"].bulk_ratio_to_ceiling_around // "-" | r(100))"' "$2"
    jq -r "$jq_round"'.modes | to_entries | map(select(.key | test("-chunk"))) | if length == 0 then empty else
        "x-rdma-chunk-size, idle guest with all its RAM in use (bulk round MB/s / ib_write_bw around it with writes of",
        "the chunk size, at most 1/8 of the filled RAM; registrations in the bulk round, both sides):",
        (.[] | (.value.registration_run1 // [])[0] as $b |
         "  \(.key): \(.value.bulk_mbs // "-" | r(1)) MB/s, \(.value.bulk_ratio_to_ceiling_around // "-" | r(100)) of ib_write_bw; " +
         "\(if $b then "\($b.remote_reg + $b.local_reg) registrations, \($b.writes) chunk writes" else "no round log" end)") end' "$2"
    jq -r "$jq_round"'.modes | if .["vmm-tcp-multifd-postcopy"] or .["qemu-tcp-multifd"] then
        "multifd over TCP, 2 lanes, before the switch (MB/s): ours switching to postcopy after the bulk round, its bulk round \(.["vmm-tcp-multifd-postcopy"].bulk_mbs // "-" | r(10));",
        "ours, multifd alone: bulk round \(.["vmm-tcp-multifd"].bulk_mbs // "-" | r(10)), whole migration \(.["vmm-tcp-multifd"].throughput_mbs // "-" | r(10)); QEMU 7.2'"'"'s multifd precopy, whole migration \(.["qemu-tcp-multifd"].throughput_mbs // "-" | r(10))" else empty end' "$2"
    echo
    echo "setup parts of each run (ours, ms; the destination's after the bar):"
    jq -r '.runs[] | select(.status != "failed" and .setup_parts != null) |
        "  \(.mode) run \(.run): \(.setup_parts)" + (if .destination_setup_parts then " | \(.destination_setup_parts)" else "" end)' "$2"
    jq -r '.failed[] | "FAILED: \(.mode) run \(.run): \(.reason) (logs: \(.logs))"' "$2"
    printf '\n\033[1m%s\033[0m\n' "end to end, from the migrate command to completion (what a person timing it sees):"
    jq -r '.qemu_time_over_ours_end_to_end as $e | .setup_ms as $s | .modes as $m |
        def ms(k): if k == null then "-" else "\(k) ms" end;
        "  QEMU'"'"'s time / ours (paired in each run, median): dynamic \($e.dynamic // "-"), pin-all \($e.pin_all // "-")   (target >= 1.5); tcp \($e.tcp // "-")",
        "  medians: dynamic \(ms($m["vmm-rdma-dynamic"].end_to_end_ms)) against QEMU'"'"'s \(ms($m["qemu-rdma-dynamic"].end_to_end_ms)), pin-all \(ms($m["vmm-rdma-pin-all"].end_to_end_ms)) against \(ms($m["qemu-rdma-pin-all"].end_to_end_ms))",
        "  setup, ours / QEMU'"'"'s (its setup-time plus its migrate command, where it connects): dynamic \(ms($s.dynamic.ours)) / \(ms($s.dynamic.qemu)), pin-all \(ms($s.pin_all.ours)) / \(ms($s.pin_all.qemu)), tcp \(ms($s.tcp.ours)) / \(ms($s.tcp.qemu))"' "$2"
    echo "transfer window (after setup; for QEMU after its command too), throughput ours / QEMU's:"
    jq -r '.ours_over_qemu | "ours / QEMU, dynamic registration: \(.dynamic // "-")",
                             "ours / QEMU, rdma-pin-all:          \(.pin_all // "-")",
                             "ours / QEMU, guest stopped, dynamic / pin-all: \(.dynamic_stopped // "-") / \(.pin_all_stopped // "-")",
                             "ours / QEMU over TCP (vmm-tcp / qemu-tcp): \(.tcp // "-")   (target >= 1.0); guest stopped: \(.tcp_stopped // "-")"' "$2"
    jq -r '.ours_over_qemu_by_guest_ram | "by guest RAM moved per second (the same guest, whatever each VMM sends):",
           "  dynamic \(.dynamic // "-"), pin-all \(.pin_all // "-"), stopped: dynamic \(.dynamic_stopped // "-"), pin-all \(.pin_all_stopped // "-")"' "$2"
    jq -r '.ours_over_qemu_paired | "paired: each migration against the ib_write_bw around it, then ours / QEMU:",
           "  by bytes sent: dynamic \(.dynamic // "-"), pin-all \(.pin_all // "-"), tcp \(.tcp // "-"); by guest RAM: dynamic \(.dynamic_by_guest_ram // "-"), pin-all \(.pin_all_by_guest_ram // "-"), tcp \(.tcp_by_guest_ram // "-")"' "$2"
}

# chart IN.json OUT.png: data moved over time, one line per mode (its first completed run); where RDMA
# writes were in flight, a dashed line of the same colour adds them (sent, not yet arrived).
chart() {
    local plot="" m i=0
    for m in $(jq -r '.modes | keys[]' "$1"); do
        i=$((i + 1))
        # Each line from its own VMM's migrate command (the samples' times count from it).
        jq -r --arg m "$m" '[.runs[] | select(.mode == $m and .status != "failed")] | first |
            "0 0 0", (.samples[] | "\(.[0]) \(.[1] / 1e6) \((.[1] + (.[2] // 0)) / 1e6)")' "$1" >"$work/$m.dat"
        plot+="${plot:+, }'$work/$m.dat' using 1:2 with linespoints lc $i title '$m'"
        if awk '$3 != $2 { found = 1 } END { exit !found }' "$work/$m.dat"; then
            plot+=", '$work/$m.dat' using 1:3 with lines dt 2 lc $i title '$m, with writes in flight'"
        fi
    done
    gnuplot <<EOF
set terminal pngcairo size 1200,560
set output '$2'
set title "Guest RAM moved over time (the slope is the throughput); $(jq -r .where "$1")"
set xlabel 'seconds since the migrate command'
set ylabel 'MB arrived (dashed: sent)'
set key outside right top Left reverse noenhanced
set grid
plot $plot
EOF
}

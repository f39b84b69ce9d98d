# bench-postcopy.sh --rdma, sourced inside it on a machine with an RDMA device (the SoftRoCE
# nested VM): expects $work $addr $dev $out and run(). Side by side in one run on one device:
#   - ib_write_lat with 4 KiB messages (a page) and ib_send_lat with 32 bytes (a request): each
#     reports half a round trip, so their sum is the floor of one fault over rdma (a SEND
#     there, an RDMA WRITE WITH IMMEDIATE back), measured just before and just after the runs
#   - once-rdma: the guest paused, sent once at the cap over rdma (the yardstick)
#   - postcopy-rdma and postcopy-tcp: the same guest, postcopy after the bulk round, over each
#     transport to the same address: fault latency, blocked time, blocked time per GiB
#   - postcopy-now-rdma: over rdma, migrate_start_postcopy right after migrate (the bulk round
#     stops there: nearly all of RAM comes in postcopy, once)
#   - postcopy-tcp-bare and postcopy-qemu: ours and QEMU 7.2's own postcopy over tcp, of the
#     same guest with nothing prefilled (the stress payload, which boots under both; under ours
#     with ctl=0, so that it makes no more exits than under QEMU), the same cap on both phases,
#     QEMU's postcopy-blocktime on; both told migrate-start-postcopy right after migrate, so both
#     switch within a moment, before their bulk pass ends; and ours once more without readahead
#     (postcopy-tcp-bare-nora). Each guest counts its own stalls (guest/stress.c, stall_us)
# With --auth only plain-N, verify-N and auth-N: postcopy over rdma as it is, with verify-ram,
# and with tls-creds, in turn. With --read only write-N, read-N, pull-N, recv-N and pullrecv-N:
# faults asked for, faults read by RDMA READ (x-rdma-postcopy-read) with the push written, faults
# and the push read (x-rdma-postcopy-read-push), and the last two with x-rdma-postcopy-read-wait 0
# at the destination, in turn, between the floors of each; --tls: all authenticated.

lat_once() {  # lat_once TOOL SIZE: its typical (median) latency in us, half a round trip
    local tool=$1 size=$2 p=$((20000 + RANDOM % 20000)) rc try
    timeout 120 "$tool" -d "$dev" -s "$size" -n 500 -F -p "$p" >"$work/lat-server.log" 2>&1 &
    local server=$!
    pids+=("$server")
    sleep 1
    for try in 1 2 3 4 5; do  # under TCG the server can take more than a second to listen
        rc=0
        timeout 100 "$tool" -d "$dev" -s "$size" -n 500 -F -p "$p" "$addr" >"$work/lat-client.log" 2>&1 || rc=$?
        grep -q "Couldn't connect" "$work/lat-client.log" || break
        sleep 2
    done
    wait "$server" 2>/dev/null || true
    [ "$rc" = 0 ] || die "$tool failed ($rc): $(tail -5 "$work/lat-client.log") / server: $(tail -5 "$work/lat-server.log")"
    # The data line: #bytes #iterations t_min t_max t_typical ...
    awk -v s="$size" '$1 == s && NF >= 5 { print $5; exit }' "$work/lat-client.log"
}
latencies() {  # latencies WHEN: writes $work/lat-WHEN.json
    local w s
    w=$(lat_once ib_write_lat 4096) s=$(lat_once ib_send_lat 32)
    [ -n "$w" ] && [ -n "$s" ] || die "no latency in the perftest output: $(tail -5 "$work/lat-client.log")"
    log "ib_write_lat 4096 B: $w us, ib_send_lat 32 B: $s us ($1)"
    jq -n --argjson w "$w" --argjson s "$s" '{write_4k_us: $w, send_32_us: $s, sum_us: ($w + $s)}' >"$work/lat-$1.json"
}

read_latencies() {  # read_latencies WHEN: writes $work/lat-WHEN.json (a READ's floor and a SEND+WRITE's)
    local r w s
    r=$(lat_once ib_read_lat 4096) w=$(lat_once ib_write_lat 4096) s=$(lat_once ib_send_lat 32)
    [ -n "$r" ] && [ -n "$w" ] && [ -n "$s" ] || die "no latency in the perftest output: $(tail -5 "$work/lat-client.log")"
    log "ib_read_lat 4096 B: $r us, ib_write_lat 4096 B: $w us, ib_send_lat 32 B: $s us ($1)"
    jq -n --argjson r "$r" --argjson w "$w" --argjson s "$s" '{read_4k_us: $r, write_4k_us: $w, send_32_us: $s}' >"$work/lat-$1.json"
}

run_qemu_postcopy() {  # writes $work/postcopy-qemu.json: both sides' last query-migrate (QEMU's)
    local port=$((20000 + RANDOM % 20000)) common
    local uri=tcp:$addr:$port
    common=(qemu-system-x86_64 -accel kvm -cpu host -m "$mem" -smp 1 -nodefaults -no-user-config -display none
            -kernel "$BUILD/guest/stress.elf" -append "bytes=$hot stall_us=$stall_us")
    rm -f "$work/qemu-s.ser" "$work/qemu-d.ser"
    "${common[@]}" -qmp "unix:$work/qemu-d.qmp,server=on,wait=off" -serial "file:$work/qemu-d.ser" -incoming defer \
        >"$work/qemu-d.log" 2>&1 &
    pids+=($!)
    "${common[@]}" -qmp "unix:$work/qemu-s.qmp,server=on,wait=off" -serial "file:$work/qemu-s.ser" >"$work/qemu-s.log" 2>&1 &
    pids+=($!)
    local i
    for i in $(seq 1 3000); do [ "$(reports "$work/qemu-s.ser")" -ge 3 ] && break; sleep 0.1; done  # as source_vm
    grep -q "stress: pass" "$work/qemu-s.ser" || die "the stress guest did not start under QEMU: $(tail -3 "$work/qemu-s.log")"
    local caps='{"capabilities": [{"capability": "postcopy-ram", "state": true}, {"capability": "postcopy-blocktime", "state": true}]}'
    q qemu-d "migrate-set-capabilities $caps" >/dev/null
    q qemu-d "migrate-incoming {\"uri\": \"$uri\"}" >/dev/null
    q qemu-s 'migrate-set-capabilities {"capabilities": [{"capability": "postcopy-ram", "state": true}]}' >/dev/null
    q qemu-s "migrate-set-parameters {\"max-bandwidth\": $cap, \"max-postcopy-bandwidth\": $cap}" >/dev/null
    local before
    before=$(guest_before "$work/qemu-s.ser")
    q qemu-s "migrate {\"uri\": \"$uri\"}" >/dev/null
    wait_status qemu-s active 60 || die "QEMU's migration did not start: $(q qemu-s query-migrate)"
    q qemu-s migrate-start-postcopy >/dev/null
    # The destination is asked only once it is done: QEMU 7.2's destination crashed (SIGSEGV,
    # SIGABRT) in two runs of two while a sampler polled its query-migrate every 10 ms in
    # postcopy with postcopy-blocktime on, and never without the sampler.
    if ! wait_status qemu-s completed 600 || ! wait_status qemu-d completed 60; then
        # Recorded, not fatal: our figures stand on their own (QEMU's destination has crashed here).
        local why
        why="QEMU's postcopy did not complete: source $(status qemu-s), destination $(status qemu-d 2>/dev/null || echo gone)"
        why+="$(grep -h . "$work/qemu-s.log" "$work/qemu-d.log" 2>/dev/null | tail -3 | tr '\n' ' ')"
        log "$why"
        jq -n --arg why "$why" --argjson s "$(q qemu-s query-migrate)" '{failed: $why, source: $s, destination: {}}' \
            >"$work/postcopy-qemu.json"
    else
        jq -n --argjson s "$(q qemu-s query-migrate)" --argjson d "$(q qemu-d query-migrate)" \
            --argjson g "$(guest_window "$before" "$(guest_after "$work/qemu-d.ser")")" \
            '{source: $s, destination: $d, guest: $g}' >"$work/postcopy-qemu.json"
    fi
    q qemu-s quit >/dev/null 2>&1 || true
    q qemu-d quit >/dev/null 2>&1 || true
    log "postcopy-qemu: $(jq -r '.source | "\(."total-time") ms, downtime \(.downtime) ms"' "$work/postcopy-qemu.json")"
}

bare_runs() {  # ours beside QEMU's: the same guest, nothing prefilled, no control device (QEMU has
              # none: its exits would slow the guest under ours alone), postcopy at once over tcp
    local saved_fill=$fill
    fill=0 ctl=0
    attempt postcopy-now tcp postcopy-tcp-bare
    readahead=0 attempt postcopy-now tcp postcopy-tcp-bare-nora
    fill=$saved_fill ctl=1
}
if [ "$auth" = 1 ]; then  # plain, verify-ram and authenticated postcopy over rdma, in turn
    "$ROOT/scripts/make-test-pki.sh" "$work/pki" --server "$addr" >/dev/null ||
        die "make-test-pki.sh failed (needs certtool: apt-get install gnutls-bin)"
    for i in $(seq 1 "$runs"); do
        creds= attempt postcopy rdma "plain-$i"
        verify=1 attempt postcopy rdma "verify-$i"
        creds=$work/pki attempt postcopy rdma "auth-$i"
        # What the source logged of its connection says whether it was authenticated.
        if ! jq -e .failed "$work/auth-$i.json" >/dev/null; then
            grep -q "postcopy channel's messages and writes tagged" "$work/postcopy-s.log" ||
                die "auth-$i: the source's log does not say its postcopy channel was tagged: $(grep -m1 'rdma ' "$work/postcopy-s.log")"
        fi
    done
    for i in $(seq 1 "$runs"); do
        for m in plain verify auth; do cat "$work/$m-$i.json" >>"$work/$m.all"; done
    done
    jq -n --argjson cap "$cap" --arg hot "$hot" --arg fill "$fill" --arg dev "$dev" \
        --slurpfile plain "$work/plain.all" --slurpfile verify "$work/verify.all" --slurpfile auth "$work/auth.all" \
        -f "$ROOT/scripts/lib/bench-postcopy-auth.jq" >"$out/bench-postcopy-rdma-auth.json"
    jq -r '.summary | to_entries[] | "\(.key): \(.value)"' "$out/bench-postcopy-rdma-auth.json"
    log "wrote $out/bench-postcopy-rdma-auth.json"
    report_failures
    exit 0
fi
# read_arm_said NAME TEXT: what the source logged of its connection says whether its faults (and
# push) were read; --tls: that those pages were tagged.
read_arm_said() {
    jq -e .failed "$work/$1.json" >/dev/null && return 0
    if [ "$tls" = 1 ]; then
        grep -q "pages read by RDMA READ tagged" "$work/postcopy-s.log" ||
            die "$1: the source's log does not say its READ pages were tagged: $(grep -m1 'rdma ' "$work/postcopy-s.log")"
    fi
    grep -q "$2" "$work/postcopy-s.log" ||
        die "$1: the source's log does not say '$2': $(grep -m1 'rdma ' "$work/postcopy-s.log")"
    local said
    said=$(grep -m1 -o 'rdma postcopy: [0-9]* faults read.*' "$work/postcopy-d.log" || true)
    log "$1: ${said:-the destination said nothing of its READs}"
    # The fault thread's own READs (pc_fetch), timed inside the run: kept beside its figures.
    local re='([0-9]+) READs awaited.* p50 ([0-9]+) us, p99 ([0-9]+) us\), ([0-9]+) outlasted'
    [[ $said =~ $re ]] || return 0
    jq --argjson here "${BASH_REMATCH[1]}" --argjson p50 "${BASH_REMATCH[2]}" --argjson p99 "${BASH_REMATCH[3]}" \
        --argjson late "${BASH_REMATCH[4]}" '. + {fetch: {here: $here, late: $late, read_p50_us: $p50, read_p99_us: $p99}}' \
        "$work/$1.json" >"$work/$1.json.new" && mv "$work/$1.json.new" "$work/$1.json"
}
if [ "$read" = 1 ]; then  # faults asked for, faults read, faults and push read, in turn (--tls: all authenticated)
    # No protocol trace: it writes lines on the fault path, and fault latency is what is measured.
    export BENCH_RDMA_TRACE=0
    name=bench-postcopy-rdma-read
    if [ "$tls" = 1 ]; then
        "$ROOT/scripts/make-test-pki.sh" "$work/pki" --server "$addr" >/dev/null ||
            die "make-test-pki.sh failed (needs certtool: apt-get install gnutls-bin)"
        creds=$work/pki name=bench-postcopy-rdma-read-tls
    fi
    kept lat-before lat- read_latencies before
    for i in $(seq 1 "$runs"); do
        reads= pull= attempt postcopy rdma "write-$i"
        reads=1 pull= attempt postcopy rdma "read-$i"
        read_arm_said "read-$i" "postcopy channel (faults by RDMA READ)"
        reads=1 pull=1 attempt postcopy rdma "pull-$i"
        read_arm_said "pull-$i" "postcopy channel (faults and the push by RDMA READ)"
        # The same two with every READ left to the receiving thread (x-rdma-postcopy-read-wait 0):
        # what the fault thread's own wait for its READ changes.
        reads=1 pull= read_wait=0 attempt postcopy rdma "recv-$i"
        read_arm_said "recv-$i" "postcopy channel (faults by RDMA READ)"
        reads=1 pull=1 read_wait=0 attempt postcopy rdma "pullrecv-$i"
        read_arm_said "pullrecv-$i" "postcopy channel (faults and the push by RDMA READ)"
    done
    kept lat-after lat- read_latencies after
    for i in $(seq 1 "$runs"); do
        for m in write read pull recv pullrecv; do cat "$work/$m-$i.json" >>"$work/$m.all"; done
    done
    jq -n --argjson cap "$cap" --arg hot "$hot" --arg fill "$fill" --arg dev "$dev" \
        --slurpfile write "$work/write.all" --slurpfile read "$work/read.all" --slurpfile pull "$work/pull.all" \
        --slurpfile recv "$work/recv.all" --slurpfile pullrecv "$work/pullrecv.all" \
        --slurpfile lb "$work/lat-before.json" --slurpfile la "$work/lat-after.json" \
        -f "$ROOT/scripts/lib/bench-postcopy-read.jq" >"$out/$name.json"
    jq -r '.summary | to_entries[] | "\(.key): \(.value)"' "$out/$name.json"
    log "wrote $out/$name.json"
    report_failures
    exit 0
fi
if [ "$vs_qemu" = 1 ]; then
    bare_runs
    kept postcopy-qemu qemu- run_qemu_postcopy
    jq -n --argjson cap "$cap" --argjson rate "$rate_mib" --arg hot "$hot" --argjson floor "$stall_us" \
        --slurpfile qemu "$work/postcopy-qemu.json" --slurpfile bare "$work/postcopy-tcp-bare.json" \
        --slurpfile nora "$work/postcopy-tcp-bare-nora.json" -f "$ROOT/scripts/lib/bench-postcopy-vs-qemu.jq" \
        >"$out/bench-postcopy-vs-qemu.json"
    jq -r '.summary | to_entries[] | "\(.key): \(.value)"' "$out/bench-postcopy-vs-qemu.json"
    log "wrote $out/bench-postcopy-vs-qemu.json"
    report_failures
    exit 0
fi
kept lat-before lat- latencies before
attempt once rdma
attempt postcopy rdma
attempt postcopy-now rdma
attempt postcopy tcp
bare_runs
kept postcopy-qemu qemu- run_qemu_postcopy
kept lat-after lat- latencies after
arrivals_or_none rdma
arrivals_or_none tcp
jq -n --argjson cap "$cap" --argjson rate "$rate_mib" --arg mem "$mem" --arg fill "$fill" --arg hot "$hot" --arg dev "$dev" \
    --slurpfile once "$work/once-rdma.json" --slurpfile rdma "$work/postcopy-rdma.json" --slurpfile tcp "$work/postcopy-tcp.json" \
    --slurpfile now "$work/postcopy-now-rdma.json" \
    --slurpfile qemu "$work/postcopy-qemu.json" --slurpfile bare "$work/postcopy-tcp-bare.json" \
    --slurpfile lb "$work/lat-before.json" --slurpfile la "$work/lat-after.json" \
    --slurpfile arr "$work/arrivals-rdma.jsonl" -f "$ROOT/scripts/lib/bench-postcopy-rdma.jq" >"$out/bench-postcopy-rdma.json"
python3 "$ROOT/scripts/lib/bench-postcopy-chart.py" "$out/bench-postcopy-rdma.json" "$out/bench-postcopy-rdma-arrivals.svg"
jq -r '.summary | to_entries[] | "\(.key): \(.value)"' "$out/bench-postcopy-rdma.json"
log "wrote $out/bench-postcopy-rdma.json and $out/bench-postcopy-rdma-arrivals.svg"
report_failures

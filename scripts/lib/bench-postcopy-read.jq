# bench-postcopy.sh --read's report: postcopy over rdma with faults asked for ($write: a SEND,
# an RDMA WRITE back), read ($read: x-rdma-postcopy-read, one RDMA READ; the push written) and
# read with the push read too ($pull: x-rdma-postcopy-read-push), run in turn; the
# floors measured before and after ($lb, $la: ib_read_lat 4 KiB; ib_write_lat 4 KiB +
# ib_send_lat 32 B); per run the READ figure over the WRITE one beside it, and the medians
# (docs/performance.md, "Postcopy faults by RDMA READ").
def num: (. | type) == "number";
def r2: . * 100 | round / 100;
def ratio(a; b): if (a | num) and (b | num) and b > 0 then (a / b) | r2 else null end;
def median: map(select(num)) | sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
            else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def lat(r): r.destination."x-postcopy"."fault-latency";
def figures(r): if r.failed then {failed: r.failed} else {
    total_ms: r.source."total-time",
    precopy_ms: ((r.source."setup-time" // 0) + ((r.source."x-round-log" // []) | map(.seconds) | add // 0) * 1000) | round,
    switch_ms: r.source."x-postcopy"."switch-ms",
    # From GO to the end: what is left after the setup, the precopy rounds and the switch.
    postcopy_ms: (r.source."total-time" - (r.source."setup-time" // 0) - r.source."x-postcopy"."switch-ms"
                  - ((r.source."x-round-log" // []) | map(.seconds) | add // 0) * 1000) | round,
    missing_pages: r.source."x-postcopy"."missing-pages",
    pushed_pages: r.source."x-postcopy"."background-pages",
    held_pages: r.source."x-postcopy"."x-held-pages",
    fault_p50_us: lat(r)."p50-us", fault_p99_us: lat(r)."p99-us", faults: lat(r).count,
    heard_by_source: r.source."x-postcopy".requests,
    return_cpu_ms: r.source."x-postcopy"."x-return-path-cpu-ms",
    return_cpu_us_per_fault: (if (lat(r).count // 0) > 0 then
        (r.source."x-postcopy"."x-return-path-cpu-ms" * 1000 / lat(r).count) | r2 else null end),
    # The whole source process from the switch to the end: the push's cost too.
    source_cpu_ms: r.source."x-postcopy"."x-source-cpu-ms",
    source_cpu_us_per_fault: (if (lat(r).count // 0) > 0 and r.source."x-postcopy"."x-source-cpu-ms" then
        (r.source."x-postcopy"."x-source-cpu-ms" * 1000 / lat(r).count) | r2 else null end),
    blocked_ms: r.destination."postcopy-blocktime",
    # The fault thread's own READs (pc_fetch), from the destination's line: how long a READ took
    # from post to seen done inside this migration, beside ib_read_lat's on an idle VM.
    read_in_run_p50_us: r.fetch.read_p50_us, read_in_run_p99_us: r.fetch.read_p99_us,
    fetched_here: r.fetch.here, fetched_late: r.fetch.late
  } end;
($write | map(figures(.))) as $w | ($read | map(figures(.))) as $r | ($pull | map(figures(.))) as $p |
($recv | map(figures(.))) as $rr | ($pullrecv | map(figures(.))) as $pr |
[range(0; [($w | length), ($r | length), ($p | length), ($rr | length), ($pr | length)] | min)] as $runs |
def col(xs; k): xs | map(.[k]) | median;
def per_run(k): [$runs[] | ratio($r[.][k]; $w[.][k])];
def within(xs; k; base): [$runs[] | ratio(xs[.][k]; xs[.][base])];
def pull_run(k; base): [$runs[] | ratio($p[.][k]; base[.][k])];
(([$lb[0].read_4k_us, $la[0].read_4k_us] | median)) as $read_floor |
(([$lb[0].write_4k_us + $lb[0].send_32_us, $la[0].write_4k_us + $la[0].send_32_us] | median)) as $write_floor |
{
  guest: {fill: $fill, hot: $hot, cap_mib_s: ($cap / 1048576), device: $dev},
  floors: {before: $lb[0], after: $la[0], read_us: $read_floor, send_plus_write_us: $write_floor},
  write: $w, read: $r, pull: $p, recv: $rr, pullrecv: $pr,
  summary: {
    "runs of each (faults asked for, faults read, in turn)": ($runs | length),
    "floors, us: ib_read_lat 4 KiB / ib_write_lat 4 KiB + ib_send_lat 32 B (medians of before and after)": "\($read_floor) / \($write_floor)",
    "fault latency p50, us: asked / read (medians)": "\(col($w; "fault_p50_us")) / \(col($r; "fault_p50_us"))",
    "fault latency p99, us: asked / read (medians)": "\(col($w; "fault_p99_us")) / \(col($r; "fault_p99_us"))",
    "read p50 / ib_read_lat (target <= 1.5)": ratio(col($r; "fault_p50_us"); $read_floor),
"a fault's READ in the run, post to done, p50 us: read / pull (medians)": "\(col($r; "read_in_run_p50_us")) / \(col($p; "read_in_run_p50_us"))",
    "that READ's p50 / ib_read_lat: read / pull (medians)": "\(ratio(col($r; "read_in_run_p50_us"); $read_floor)) / \(ratio(col($p; "read_in_run_p50_us"); $read_floor))",
    "fault p50 / the run's own READ p50, per run: read; pull": "\(within($r; "fault_p50_us"; "read_in_run_p50_us")); \(within($p; "fault_p50_us"; "read_in_run_p50_us"))",
    "READs the fault thread awaited and placed / left to the receiving thread (medians): read; pull": "\(col($r; "fetched_here")) / \(col($r; "fetched_late")); \(col($p; "fetched_here")) / \(col($p; "fetched_late"))",
    "every READ left to the receiving thread (x-rdma-postcopy-read-wait 0): fault p50, us: read / pull (medians)": "\(col($rr; "fault_p50_us")) / \(col($pr; "fault_p50_us"))",
    "fault p50, the fault thread awaiting its READ / the receiving thread taking it, per run: read; pull": "\([$runs[] | ratio($r[.].fault_p50_us; $rr[.].fault_p50_us)]); \([$runs[] | ratio($p[.].fault_p50_us; $pr[.].fault_p50_us)])",
    "the same without the wait: fault p50 / asked's, per run: read; pull": "\([$runs[] | ratio($rr[.].fault_p50_us; $w[.].fault_p50_us)]); \([$runs[] | ratio($pr[.].fault_p50_us; $w[.].fault_p50_us)])",
    "the same without the wait: postcopy / asked's, per run: read; pull": "\([$runs[] | ratio($rr[.].postcopy_ms; $w[.].postcopy_ms)]); \([$runs[] | ratio($pr[.].postcopy_ms; $w[.].postcopy_ms)])",
    "asked p50 / (ib_write_lat + ib_send_lat)": ratio(col($w; "fault_p50_us"); $write_floor),
    "fault p50, read / asked, per run (target <= 0.5)": per_run("fault_p50_us"),
    "faults the source heard of: asked / read (medians)": "\(col($w; "heard_by_source")) / \(col($r; "heard_by_source"))",
    "source return-path CPU per fault, us: asked / read (medians)": "\(col($w; "return_cpu_us_per_fault")) / \(col($r; "return_cpu_us_per_fault"))",
    "source CPU per fault, read / asked, per run (target <= 0.05)": per_run("return_cpu_us_per_fault"),
    "source process CPU from the switch, ms: asked / read / pull (medians)": "\(col($w; "source_cpu_ms")) / \(col($r; "source_cpu_ms")) / \(col($p; "source_cpu_ms"))",
    "source process CPU per fault, read / asked, per run": per_run("source_cpu_us_per_fault"),
    "source process CPU per fault, pull / asked, per run": pull_run("source_cpu_us_per_fault"; $w),
    "guest blocked, ms: asked / read (medians)": "\(col($w; "blocked_ms")) / \(col($r; "blocked_ms"))",
    "total, ms: asked / read (medians)": "\(col($w; "total_ms")) / \(col($r; "total_ms"))",
    "total, read / asked, per run": per_run("total_ms"),
    "precopy (setup and rounds), ms: asked / read (medians)": "\(col($w; "precopy_ms")) / \(col($r; "precopy_ms"))",
    "postcopy (from GO to the end), ms: asked / read (medians)": "\(col($w; "postcopy_ms")) / \(col($r; "postcopy_ms"))",
    "postcopy, read / asked, per run (target <= 1)": per_run("postcopy_ms"),
    "pages missing at the switch: asked / read (medians)": "\(col($w; "missing_pages")) / \(col($r; "missing_pages"))",
    "push read too: fault p50, us; faults the source heard of; return-path CPU per fault, us (medians)": "\(col($p; "fault_p50_us")); \(col($p; "heard_by_source")); \(col($p; "return_cpu_us_per_fault"))",
    "push read too: pages pushed / held by the source's count (medians)": "\(col($p; "pushed_pages")) / \(col($p; "held_pages"))",
    "push read too: fault p50, pull / asked, per run (target <= 0.5)": pull_run("fault_p50_us"; $w),
    "push read too: source CPU per fault, pull / asked, per run (target <= 0.05)": pull_run("return_cpu_us_per_fault"; $w),
    "push read too: guest blocked, ms (median)": col($p; "blocked_ms"),
    "push read too: postcopy, pull / asked, per run (target <= 1)": pull_run("postcopy_ms"; $w),
    "push read too: postcopy, pull / read, per run": pull_run("postcopy_ms"; $r),
    "push read too: total, pull / asked, per run": pull_run("total_ms"; $w)
  }
}

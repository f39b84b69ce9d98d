# bench-postcopy.sh --auth's report: postcopy over rdma as it is ($plain), with verify-ram
# ($verify: every page summed) and with tls-creds ($auth: summed, and every request and write
# tagged), run in turn; per run the authenticated figure over the other two measured beside it,
# and the medians of each (docs/performance.md, "Authenticated postcopy over RDMA").
def num: (. | type) == "number";
def r2: . * 100 | round / 100;
def ratio(a; b): if (a | num) and (b | num) and b > 0 then (a / b) | r2 else null end;
def median: map(select(num)) | sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
            else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def lat(r): r.destination."x-postcopy"."fault-latency";
def figures(r): if r.failed then {failed: r.failed} else {
    total_ms: r.source."total-time", setup_ms: r.source."setup-time",
    fault_p50_us: lat(r)."p50-us", fault_p99_us: lat(r)."p99-us", faults: lat(r).count,
    serve_p50_us: r.source."x-postcopy"."x-serve-latency"."p50-us",
    blocked_ms: r.destination."postcopy-blocktime",
    downtime_ms: r.source.downtime
  } end;
($plain | map(figures(.))) as $p | ($verify | map(figures(.))) as $v | ($auth | map(figures(.))) as $a |
[range(0; [($p | length), ($v | length), ($a | length)] | min)] as $runs |
def col(xs; k): xs | map(.[k]) | median;
def three(k): "\(col($p; k)) / \(col($v; k)) / \(col($a; k))";
def per_run(xs; k): [$runs[] | ratio($a[.][k]; xs[.][k])];
{
  guest: {fill: $fill, hot: $hot, cap_mib_s: ($cap / 1048576), device: $dev},
  plain: $p, verify: $v, authenticated: $a,
  summary: {
    "runs of each (plain, verify-ram, authenticated, in turn)": ($runs | length),
    "fault latency p50, us: plain / verify-ram / authenticated (medians)": three("fault_p50_us"),
    "fault latency p99, us: plain / verify-ram / authenticated (medians)": three("fault_p99_us"),
    "at the source (x-serve-latency p50), us: plain / verify-ram / authenticated": three("serve_p50_us"),
    "guest blocked, ms: plain / verify-ram / authenticated (medians)": three("blocked_ms"),
    "setup, ms: plain / verify-ram / authenticated (medians)": three("setup_ms"),
    "total, ms: plain / verify-ram / authenticated (medians)": three("total_ms"),
    "total, authenticated / verify-ram, per run": per_run($v; "total_ms"),
    "total, authenticated / plain, per run": per_run($p; "total_ms"),
    "fault latency p50, authenticated / verify-ram, per run": per_run($v; "fault_p50_us"),
    "authenticated / verify-ram total (median of runs)": (per_run($v; "total_ms") | median),
    "authenticated / plain total (median of runs)": (per_run($p; "total_ms") | median)
  }
}

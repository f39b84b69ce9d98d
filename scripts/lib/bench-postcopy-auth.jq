# bench-postcopy.sh --auth's report: postcopy over rdma without ($plain) and with ($auth)
# tls-creds, run alternately; per pair the authenticated figure over the plain one, and the
# medians of each (docs/performance.md, "Authenticated postcopy over RDMA").
def num: (. | type) == "number";
def r2: . * 100 | round / 100;
def ratio(a; b): if (a | num) and (b | num) and b > 0 then (a / b) | r2 else null end;
def median: map(select(num)) | sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
            else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def lat(r): r.destination."x-postcopy"."fault-latency";
def figures(r): if r.failed then {failed: r.failed} else {
    total_ms: r.source."total-time",
    fault_p50_us: lat(r)."p50-us", fault_p99_us: lat(r)."p99-us", faults: lat(r).count,
    serve_p50_us: r.source."x-postcopy"."x-serve-latency"."p50-us",
    blocked_ms: r.destination."postcopy-blocktime",
    downtime_ms: r.source.downtime
  } end;
($plain | map(figures(.))) as $p | ($auth | map(figures(.))) as $a |
[range(0; [($p | length), ($a | length)] | min)] as $pairs |
def col(xs; k): xs | map(.[k]);
def pair_ratios(k): [$pairs[] | ratio($a[.][k]; $p[.][k])];
{
  guest: {fill: $fill, hot: $hot, cap_mib_s: ($cap / 1048576), device: $dev},
  plain: $p, authenticated: $a,
  summary: {
    "pairs (plain, authenticated, alternating)": ($pairs | length),
    "fault latency p50, us: plain / authenticated (medians)": "\(col($p; "fault_p50_us") | median) / \(col($a; "fault_p50_us") | median)",
    "fault latency p50, authenticated / plain, per pair": pair_ratios("fault_p50_us"),
    "fault latency p99, us: plain / authenticated (medians)": "\(col($p; "fault_p99_us") | median) / \(col($a; "fault_p99_us") | median)",
    "at the source (x-serve-latency p50), us: plain / authenticated (medians)": "\(col($p; "serve_p50_us") | median) / \(col($a; "serve_p50_us") | median)",
    "guest blocked, ms: plain / authenticated (medians)": "\(col($p; "blocked_ms") | median) / \(col($a; "blocked_ms") | median)",
    "total, ms: plain / authenticated (medians)": "\(col($p; "total_ms") | median) / \(col($a; "total_ms") | median)",
    "total, authenticated / plain, per pair": pair_ratios("total_ms"),
    "authenticated / plain total (median of pairs)": (pair_ratios("total_ms") | median)
  }
}

#!/usr/bin/env python3
"""bench-postcopy-chart.py REPORT.json OUT.svg: the postcopy run's arrivals at the destination
over time, both kinds: pages a fault requested (and got), and pages the background push
placed. Plain SVG from the standard library, so the benchmark needs nothing more."""
import json
import sys

W, H, PAD = 720, 360, 56


def path(points, sx, sy):
    return " ".join(f"{'M' if i == 0 else 'L'}{sx(t):.1f},{sy(v):.1f}" for i, (t, v) in enumerate(points))


def main(report, out):
    with open(report) as f:
        r = json.load(f)
    arr = r["arrivals"] or [{"t": 0, "requested": 0, "pushed": 0}]
    t_max = max(a["t"] for a in arr) or 1
    v_max = max(max(a["requested"], a["pushed"]) for a in arr) or 1
    sx = lambda t: PAD + (W - 2 * PAD) * t / t_max
    sy = lambda v: H - PAD - (H - 2 * PAD) * v / v_max
    g = r["guest"]
    title = (f"postcopy arrivals: {g['mem']} guest, {g['hot']} rewritten at {g['dirty_rate_mib_s']:.0f} MiB/s, "
             f"cap {g['cap_mib_s']:.0f} MiB/s" + (f", over rdma ({g['device']})" if "device" in g else ""))
    series = [("pushed", "#1f77b4", "placed by the background push"), ("requested", "#d62728", "faulted on and waited for (requested)")]
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="20" text-anchor="middle">{title}</text>',
           f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="black"/>',
           f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" stroke="black"/>',
           f'<text x="{W / 2}" y="{H - 16}" text-anchor="middle">seconds since the switch (0 to {t_max:.1f})</text>',
           f'<text x="14" y="{H / 2}" transform="rotate(-90 14 {H / 2})" text-anchor="middle">pages (0 to {v_max})</text>']
    for i, (key, color, label) in enumerate(series):
        pts = [(a["t"], a[key]) for a in arr]
        svg.append(f'<path d="{path(pts, sx, sy)}" fill="none" stroke="{color}" stroke-width="2"/>')
        svg.append(f'<text x="{PAD + 10}" y="{PAD + 16 * i}" fill="{color}">{label}: {arr[-1][key]} pages</text>')
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: bench-postcopy-chart.py REPORT.json OUT.svg")
    main(sys.argv[1], sys.argv[2])

#!/usr/bin/env python3
"""Plot the open-loop timelines of `tessera bench ... --offered-rate --json`
runs (the lazy burst test, the thesis's Fig. 4.5) as one SVG, no
dependencies.

    scripts/timeline-plot.py OUT.svg "TITLE" LABEL=run.json [LABEL=run.json ...]

Each run gives, per 100 ms step: the offered rate (dashed, drawn once), the
rate its engine accepted (requests not dropped) and, for lazy, the rate at
which transactions were substantiated (acknowledged minus the growth of the
transactions waiting for their later phase).
"""
import json
import sys

W, H, L, R, T, B = 900, 420, 80, 220, 40, 50
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def rates(tl):
    out = []
    for prev, cur in zip(tl, tl[1:]):
        dt = cur[0] - prev[0]
        if dt <= 0:
            continue
        off = (cur[1] - prev[1]) / dt
        acc = (cur[2] - prev[2]) / dt
        done = ((cur[4] - prev[4]) - (cur[5] - prev[5])) / dt
        out.append((cur[0], off, acc, max(done, 0.0)))
    return out


def main():
    out, title, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
    series = []
    offered = None
    for i, arg in enumerate(runs):
        label, path = arg.split("=", 1)
        d = json.load(open(path))
        r = rates(d["open_loop"]["timeline"])
        if offered is None:
            offered = [(t, o) for t, o, _, _ in r]
        c = COLORS[i % len(COLORS)]
        series.append((f"{label}: accepted", [(t, a) for t, _, a, _ in r], c, ""))
        if d["protocol"] == "lazy":
            series.append(
                (f"{label}: substantiated", [(t, s) for t, _, _, s in r], c, "2,3")
            )
    series.insert(0, ("offered", offered, "#555555", "8,4"))
    tmax = max(t for _, pts, _, _ in series for t, _ in pts)
    ymax = max(y for _, pts, _, _ in series for _, y in pts) * 1.1
    x = lambda t: L + (W - L - R) * t / tmax
    y = lambda v: H - B - (H - T - B) * v / ymax
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
        f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
        f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
        f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">seconds into the measured run</text>',
        f'<text x="18" y="{(T + H - B) / 2}" transform="rotate(-90 18 {(T + H - B) / 2})" text-anchor="middle">transactions per second</text>',
    ]
    for k in range(6):
        v = ymax * k / 5
        svg.append(f'<text x="{L - 6}" y="{y(v) + 4}" text-anchor="end">{v / 1000:.0f}K</text>')
        svg.append(f'<line x1="{L}" y1="{y(v)}" x2="{W - R}" y2="{y(v)}" stroke="#eeeeee"/>')
    for k in range(int(tmax) + 1):
        svg.append(f'<text x="{x(k)}" y="{H - B + 16}" text-anchor="middle">{k}</text>')
    for i, (name, pts, c, dash) in enumerate(series):
        p = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
        d = f' stroke-dasharray="{dash}"' if dash else ""
        svg.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.6"{d} points="{p}"/>')
        ly = T + 10 + 18 * i
        svg.append(f'<line x1="{W - R + 10}" y1="{ly}" x2="{W - R + 35}" y2="{ly}" stroke="{c}" stroke-width="2"{d}/>')
        svg.append(f'<text x="{W - R + 40}" y="{ly + 4}">{name}</text>')
    svg.append("</svg>")
    open(out, "w").write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# TPC-C throughput with durability none / async / sync (docs/BENCHMARKS.md):
# every configuration REPS times, interleaved; data directories under
# $TMPDIR (a real disk unless it is a tmpfs), deleted after each run.
# Usage: scripts/durability-matrix.sh [REPS] [SECONDS] [CC]
set -euo pipefail
REPS=${1:-3}
SECS=${2:-10}
CC=${3:-silo}
BIN=${BIN:-target/release/tessera}
[ -x "$BIN" ] || cargo build --release -p tessera-cli >&2
OUT=$(mktemp -d)
for rep in $(seq 1 "$REPS"); do
  for tw in "1 1" "2 2"; do
    set -- $tw
    for d in none async sync; do
      dir=""
      [ "$d" != none ] && dir="--data-dir $(mktemp -d)/db"
      echo "rep $rep: $CC threads=$1 W=$2 durability=$d (load $(cut -d' ' -f1 /proc/loadavg))" >&2
      "$BIN" bench tpcc --cc "$CC" --threads "$1" --warehouses "$2" --seconds "$SECS" --warmup 1 \
        --durability "$d" $dir --quiet --json >"$OUT/$d-$1-$2-$rep.json"
      [ -n "$dir" ] && rm -rf "$(dirname "${dir#--data-dir }")"
    done
  done
done
python3 - "$OUT" <<'PY'
import json, sys, glob, statistics, os, collections
runs = collections.defaultdict(list)
for f in glob.glob(os.path.join(sys.argv[1], "*.json")):
    d, t, w, _ = os.path.basename(f)[:-5].split("-")
    runs[(int(t), int(w), d)].append(json.load(open(f)))
print("| threads | W | durability | txn/s (median) | runs | vs none | log B/txn | log MB/s | fsyncs/s | durable commit latency p50 / p99 / max ms |")
print("|---|---|---|---|---|---|---|---|---|---|")
for t, w in [(1, 1), (2, 2)]:
    base = statistics.median(r["throughput_txn_per_s"] for r in runs[(t, w, "none")])
    for d in ["none", "async", "sync"]:
        rs = runs[(t, w, d)]
        tps = [r["throughput_txn_per_s"] for r in rs]
        med = statistics.median(tps)
        m = sorted(rs, key=lambda r: r["throughput_txn_per_s"])[len(rs) // 2]
        log = m.get("log") or {}
        secs = m["seconds"]
        lat = m.get("durable_latency_us") or {}
        lat_s = "-" if not lat else f'{lat["p50"]/1e3:.1f} / {lat["p99"]/1e3:.1f} / {lat["max"]/1e3:.1f}'
        print(f'| {t} | {w} | {d} | {med:,.0f} | {" / ".join(f"{x/1e3:.1f}K" for x in sorted(tps))} | {med/base:.2f} | '
              f'{log.get("bytes_per_txn", 0):,.0f} | {log.get("bytes", 0)/1e6/secs:,.0f} | {log.get("fsyncs", 0)/secs:,.0f} | {lat_s} |')
PY

#!/usr/bin/env bash
# YCSB matrix for docs/BENCHMARKS.md: CCBench's settings (1M records, 10 ops
# per transaction, 4-byte values, blind writes), read ratios 0.5 and 0.95,
# theta 0 and 0.99, 1 and 2 threads, silo and nocc. Runs every configuration
# REPS times, interleaved (round-robin over configurations), and prints a
# Markdown table of medians. Usage: scripts/ycsb-matrix.sh [REPS] [SECONDS]
set -euo pipefail
REPS=${1:-3}
SECS=${2:-4}
BIN=${BIN:-target/release/tessera}
[ -x "$BIN" ] || cargo build --release -p tessera-cli >&2
OUT=$(mktemp -d)
configs=()
for cc in silo nocc; do
  for t in 1 2; do
    for r in 0.5 0.95; do
      for z in 0 0.99; do
        configs+=("$cc $t $r $z")
      done
    done
  done
done
for rep in $(seq 1 "$REPS"); do
  for c in "${configs[@]}"; do
    set -- $c
    echo "rep $rep: cc=$1 threads=$2 read=$3 theta=$4 (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    "$BIN" bench ycsb --cc "$1" --threads "$2" --records 1000000 --ops-per-txn 10 \
      --read-ratio "$3" --theta "$4" --value-size 4 --seconds "$SECS" --warmup 1 \
      --quiet --json >"$OUT/$1-$2-$3-$4-$rep.json"
  done
done
python3 - "$OUT" "$REPS" <<'PY'
import json, sys, statistics, glob, os
out, reps = sys.argv[1], int(sys.argv[2])
rows = {}
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    cc, t, r, z, _ = os.path.basename(f)[:-5].split("-")
    d = json.load(open(f))
    rows.setdefault((cc, int(t), r, z), []).append(d)
print("| cc | threads | read ratio | theta | txn/s (median) | runs | abort rate | p50 us | p99 us |")
print("|---|---|---|---|---|---|---|---|---|")
for (cc, t, r, z), ds in sorted(rows.items()):
    tp = sorted(d["throughput_txn_per_s"] for d in ds)
    med = statistics.median(tp)
    m = min(ds, key=lambda d: abs(d["throughput_txn_per_s"] - med))
    rate = m["abort_rate"] * 100
    lat = m["latency_us"]
    runs = " / ".join(f"{x/1000:.0f}K" for x in tp)
    print(f"| {cc} | {t} | {r} | {z} | {med:,.0f} | {runs} | {rate:.2f}% | {lat['p50']:.1f} | {lat['p99']:.1f} |")
PY
rm -rf "$OUT"

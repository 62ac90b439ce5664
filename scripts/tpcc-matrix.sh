#!/usr/bin/env bash
# TPC-C runs for docs/BENCHMARKS.md: 1 and 2 threads, W = threads and W = 1,
# every configuration REPS times, interleaved; prints a Markdown table of
# medians (total and per type) and the loaded memory per warehouse.
# Usage: scripts/tpcc-matrix.sh [REPS] [SECONDS] [CC...]
set -euo pipefail
REPS=${1:-3}
SECS=${2:-5}
shift 2 || true
CCS=${*:-silo}
BIN=${BIN:-target/release/tessera}
[ -x "$BIN" ] || cargo build --release -p tessera-cli >&2
OUT=$(mktemp -d)
configs=()
for cc in $CCS; do
  for tw in "1 1" "2 2" "2 1"; do
    configs+=("$cc $tw")
  done
done
for rep in $(seq 1 "$REPS"); do
  for c in "${configs[@]}"; do
    set -- $c
    echo "rep $rep: cc=$1 threads=$2 warehouses=$3 (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    "$BIN" bench tpcc --cc "$1" --threads "$2" --warehouses "$3" --seconds "$SECS" \
      --warmup 1 --quiet --json >"$OUT/$1-$2-$3-$rep.json" || echo "exit $? (see JSON)" >&2
  done
done
python3 - "$OUT" <<'PY'
import json, sys, statistics, glob, os
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    cc, t, w, _ = os.path.basename(f)[:-5].split("-")
    rows.setdefault((cc, int(t), int(w)), []).append(json.load(open(f)))
types = ["new_order", "payment", "order_status", "delivery", "stock_level"]
print("| cc | threads | W | txn/s (median) | runs | conflict aborts | NewOrder/s | p50 / p99 us NewOrder | p50 us Payment / OrderStatus / Delivery / StockLevel | consistency | MiB per W |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for (cc, t, w), ds in sorted(rows.items()):
    tp = sorted(d["throughput_txn_per_s"] for d in ds)
    med = statistics.median(tp)
    m = min(ds, key=lambda d: abs(d["throughput_txn_per_s"] - med))
    tx = m["transactions"]
    no = tx["new_order"]
    others = " / ".join(f'{tx[k]["latency_us"]["p50"]:.1f}' for k in types[1:])
    cons = all(d["consistency"].get("passed", False) for d in ds)
    mem = m["load"].get("resident_growth_bytes") or 0
    runs = " / ".join(f"{x/1000:.1f}K" for x in tp)
    print(f"| {cc} | {t} | {w} | {med:,.0f} | {runs} | {m['abort_rate']*100:.2f}% | {no['throughput_txn_per_s']:,.0f} | "
          f"{no['latency_us']['p50']:.1f} / {no['latency_us']['p99']:.1f} | {others} | {'all hold' if cons else 'FAILED'} | {mem/w/2**20:.0f} |")
PY
rm -rf "$OUT"

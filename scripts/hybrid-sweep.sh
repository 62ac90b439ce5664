#!/usr/bin/env bash
# TPC-C-hybrid sweep for docs/BENCHMARKS.md (ERMIA's Figure 5 experiment):
# Q2* size swept over SIZES, every protocol in CCS, every thread count in
# THREADS (warehouses = threads), REPS interleaved repetitions; prints a
# Markdown table of medians: total throughput, Q2* commits per second, Q2*
# abort ratio, and Q2* commits relative to silo at the same point.
# Usage: scripts/hybrid-sweep.sh [REPS] [SECONDS]
# Environment: CCS="silo si ssn" THREADS="1 2" SIZES="1 5 10 20 40 60 80 100"
#   ARGS="--no-retry" (extra bench options, e.g. ERMIA's and Silo's default
#   of not retrying conflict-aborted transactions)
set -euo pipefail
REPS=${1:-3}
SECS=${2:-5}
CCS=${CCS:-silo si ssn}
THREADS=${THREADS:-1 2}
SIZES=${SIZES:-1 5 10 20 40 60 80 100}
ARGS=${ARGS:-}
BIN=${BIN:-target/release/tessera}
[ -x "$BIN" ] || cargo build --release -p tessera-cli >&2
OUT=$(mktemp -d)
for rep in $(seq 1 "$REPS"); do
  for t in $THREADS; do
    for q in $SIZES; do
      for cc in $CCS; do
        echo "rep $rep: threads=$t q2=$q% cc=$cc (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        "$BIN" bench tpcc-hybrid --cc "$cc" --threads "$t" --q2-size "$q" --seconds "$SECS" \
          --warmup 1 --quiet --json $ARGS >"$OUT/$cc-$t-$q-$rep.json" || echo "exit $? (see JSON)" >&2
      done
    done
  done
done
python3 - "$OUT" <<'PY'
import json, sys, statistics, glob, os
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    cc, t, q, _ = os.path.basename(f)[:-5].split("-")
    rows.setdefault((int(t), int(q), cc), []).append(json.load(open(f)))
def med(ds, f):
    return statistics.median(f(d) for d in ds)
q2 = lambda d: d["transactions"]["q2_star"]
print("| threads | Q2* size | cc | txn/s | Q2* commits/s | Q2* abort % | all aborts % | Q2* commits vs silo | consistency |")
print("|---|---|---|---|---|---|---|---|---|")
for (t, q, cc), ds in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1], ["silo", "si", "ssn", "nocc"].index(kv[0][2]))):
    tp = med(ds, lambda d: d["throughput_txn_per_s"])
    qc = med(ds, lambda d: q2(d)["throughput_txn_per_s"])
    qa = med(ds, lambda d: q2(d)["abort_rate"] * 100)
    aa = med(ds, lambda d: d["abort_rate"] * 100)
    base = rows.get((t, q, "silo"))
    rel = ""
    if base:
        b = med(base, lambda d: q2(d)["throughput_txn_per_s"])
        rel = f"{qc / b:.1f}x" if b > 0 else ("inf (silo 0)" if qc > 0 else "-")
    cons = all(d["consistency"].get("passed", False) for d in ds)
    print(f"| {t} | {q}% | {cc} | {tp:,.0f} | {qc:,.1f} | {qa:.1f} | {aa:.2f} | {rel} | {'all hold' if cons else 'FAILED'} |")
PY
rm -rf "$OUT"

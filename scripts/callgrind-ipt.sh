#!/usr/bin/env bash
# Instructions per committed transaction, as docs/BENCHMARKS.md measures them:
# the same 1-thread command under callgrind for two durations; the difference
# of instructions over the difference of committed transactions (the load and
# the start-up cancel out). Every thread of the process is counted.
# Usage: scripts/callgrind-ipt.sh WORKLOAD CC [SHORT LONG]
#   WORKLOAD: tpcc (W=1, full mix) or ycsb (CCBench settings: 1M records,
#   10 ops, 50% reads, 4-byte values, uniform)
# BIN=path overrides the binary (to compare two builds).
set -euo pipefail
WL=$1
CC=$2
S1=${3:-2}
S2=${4:-6}
BIN=${BIN:-target/release/tessera}
[ -x "$BIN" ] || cargo build --release -p tessera-cli >&2
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
case "$WL" in
  tpcc) ARGS=(bench tpcc --cc "$CC" --threads 1 --warehouses 1) ;;
  ycsb) ARGS=(bench ycsb --cc "$CC" --threads 1 --records 1000000 --ops-per-txn 10
              --read-ratio 0.5 --value-size 4) ;;
  *) echo "unknown workload $WL (tpcc or ycsb)" >&2; exit 2 ;;
esac
for s in "$S1" "$S2"; do
  if ! valgrind --tool=callgrind --callgrind-out-file="$OUT/cg-$s.out" \
    "$BIN" "${ARGS[@]}" --seconds "$s" --warmup 0 --quiet --json >"$OUT/cg-$s.json" 2>"$OUT/cg-$s.err"; then
    echo "the $s s run failed:" >&2
    tail -20 "$OUT/cg-$s.err" >&2
    exit 1
  fi
done
python3 - "$OUT" "$S1" "$S2" "$WL" "$CC" <<'PY'
import json, re, sys
out, s1, s2, wl, cc = sys.argv[1:]
def ir(s):
    tot = 0
    for line in open(f"{out}/cg-{s}.out"):
        if line.startswith("totals:") or line.startswith("summary:"):
            tot = int(line.split()[1])
    return tot
def commits(s):
    return json.load(open(f"{out}/cg-{s}.json"))["committed"]
i1, i2, c1, c2 = ir(s1), ir(s2), commits(s1), commits(s2)
if c2 == c1:
    sys.exit(f"both runs committed {c1} transactions: lengthen the longer run")
print(f"{wl} {cc}: {(i2 - i1) / (c2 - c1):.0f} instructions/txn "
      f"(Ir {i1} -> {i2}, commits {c1} -> {c2})")
PY

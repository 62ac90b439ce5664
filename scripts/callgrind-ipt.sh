#!/usr/bin/env bash
# Instructions per committed transaction, as docs/BENCHMARKS.md measures them:
# the same 1-thread command under callgrind for two run lengths (fixed
# transaction counts, --txns, so that a busy machine changes nothing); the
# difference of instructions over the difference of committed transactions
# (the load and the start-up cancel out). The figures come from the same pair of runs:
#   process: every instruction of every thread of the process (the issue's
#            method; it includes the end-of-run consistency check, whose cost
#            grows with the data a run adds);
#   process less the consistency check (TPC-C only): the same, without the
#            check's instructions, which the peers' benchmarks do not run;
#   driver:  only what the driver threads spend inside their transaction loop
#            (`driver::run::worker_loop`, inclusive): the transactions, their
#            retries and the driver's own bookkeeping.
#
# Usage: scripts/callgrind-ipt.sh WORKLOAD CC [SHORT LONG]   (transaction counts)
#        scripts/callgrind-ipt.sh all [CC ...]      (TPC-C and YCSB, default silo)
#   WORKLOAD: tpcc (W=1, full mix) or ycsb (CCBench settings: 1M records,
#   10 ops, 50% reads, 4-byte values, uniform)
# BIN=path overrides the binary (to compare two builds); EXTRA="--mix 0,0,0,0,100"
# adds arguments to the bench command (one TPC-C transaction type alone, say).
set -euo pipefail
BIN=${BIN:-target/release/tessera}
[ -x "$BIN" ] || cargo build --release -p tessera-cli >&2

if [ "${1:-}" = all ]; then
  shift
  [ $# -gt 0 ] || set -- silo
  for cc in "$@"; do
    for wl in tpcc ycsb; do
      BIN=$BIN "$0" "$wl" "$cc"
    done
  done
  exit 0
fi

WL=$1
CC=$2
case "$WL" in
  tpcc) S1=${3:-5000}; S2=${4:-20000} ;;
  *) S1=${3:-50000}; S2=${4:-250000} ;;
esac
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
    "$BIN" "${ARGS[@]}" ${EXTRA:-} --txns "$s" --warmup 0 --quiet --json >"$OUT/cg-$s.json" 2>"$OUT/cg-$s.err"; then
    echo "the $s s run failed:" >&2
    tail -20 "$OUT/cg-$s.err" >&2
    exit 1
  fi
  callgrind_annotate --inclusive=yes --threshold=100 "$OUT/cg-$s.out" 2>/dev/null >"$OUT/inc-$s.txt" || true
  grep 'driver::run::worker_loop' "$OUT/inc-$s.txt" | head -1 >"$OUT/loop-$s.txt" || true
  grep -E 'tpcc::consistency::check_consistency \[' "$OUT/inc-$s.txt" | head -1 >"$OUT/check-$s.txt" || true
done
python3 - "$OUT" "$S1" "$S2" "$WL" "$CC" <<'PY'
import json, sys
out, s1, s2, wl, cc = sys.argv[1:]
def ir(s):
    tot = 0
    for line in open(f"{out}/cg-{s}.out"):
        if line.startswith("totals:") or line.startswith("summary:"):
            tot = int(line.split()[1])
    return tot
def loop(s):
    text = open(f"{out}/loop-{s}.txt").read().split()
    # Inclusive Ir of every driver thread's loop (one line per symbol; the
    # threads of a 1-thread run: one).
    return int(text[0].replace(",", "")) if text else None
def check(s):
    # Inclusive Ir of TPC-C's end-of-run consistency check (0 for YCSB).
    text = open(f"{out}/check-{s}.txt").read().split()
    return int(text[0].replace(",", "")) if text else 0
def commits(s):
    return json.load(open(f"{out}/cg-{s}.json"))["committed"]
i1, i2, c1, c2 = ir(s1), ir(s2), commits(s1), commits(s2)
if c2 == c1:
    sys.exit(f"both runs committed {c1} transactions: lengthen the longer run")
l1, l2 = loop(s1), loop(s2)
drv = f"{(l2 - l1) / (c2 - c1):.0f}" if l1 is not None and l2 is not None else "?"
k1, k2 = check(s1), check(s2)
less = ""
if k1 or k2:
    less = f", {((i2 - k2) - (i1 - k1)) / (c2 - c1):.0f} (process less the consistency check)"
print(f"{wl} {cc}: {(i2 - i1) / (c2 - c1):.0f} instructions/txn (process){less}, "
      f"{drv} (driver loop) (Ir {i1} -> {i2}, commits {c1} -> {c2})")
PY

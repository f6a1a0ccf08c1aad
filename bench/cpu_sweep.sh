#!/usr/bin/env bash
# CPU benchmark sweep of issue 4 (GDN and KDA, fwd and fwd+bwd, hqk/hv 16/16 and 16/32,
# K = V = 128, T = 512 / 4096 / 16384, fp32 and bf16, eager-live, 2 threads), written as
# PERFORMANCE.md section 6 JSON lines to bench/results/cpu-<op>-<pass>-<yyyymmdd>.jsonl
# (environment line first). Usage: bench/cpu_sweep.sh [build dir] [extra bench flags...]
# Env: OPS, PASSES, HEADS ("16/16 16/32"), LENS, DTYPES, THREADS, TAG (file name suffix).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build/release}"
shift || true
BIN="$BUILD/tools/linattn"
DATE="$(date -u +%Y%m%d)"
OPS="${OPS:-gdn kda}"
PASSES="${PASSES:-fwd fwdbwd}"
HEADS="${HEADS:-16/16 16/32}"
LENS="${LENS:-512 4096 16384}"
DTYPES="${DTYPES:-fp32 bf16}"
THREADS="${THREADS:-2}"
mkdir -p "$ROOT/bench/results"
SUMMARY='import json, sys
for line in sys.stdin:
    c = json.loads(line)
    print("%s %s %s/%s T=%s %s: p50 %.2f ms, %.0f%% of peak, %.2fx the token fp32 fwd" % (c["op"], c["pass"],
          c["hqk"], c["hv"], c["lengths"], c["dtype"], c["p50_ms"], 100 * c["pct_of_peak"], c.get("speedup_vs_baseline", 0)))'

for op in $OPS; do
  for pass in $PASSES; do
    out="$ROOT/bench/results/cpu-$op-$pass-$DATE${TAG:+-$TAG}.jsonl"
    : > "$out"
    for heads in $HEADS; do
      for len in $LENS; do
        for dt in $DTYPES; do
          lines="$("$BIN" bench --op "$op" --pass "$pass" --backend cpu --mode eager-live \
            --hqk "${heads%/*}" --hv "${heads#*/}" --k 128 --v 128 --lengths "$len" --dtype "$dt" \
            --threads "$THREADS" --json "$@")"
          if [ ! -s "$out" ]; then echo "$lines" | head -1 >> "$out"; fi
          echo "$lines" | tail -n +2 >> "$out"
          echo "$lines" | tail -n +2 | python3 -c "$SUMMARY"
        done
      done
    done
  done
done

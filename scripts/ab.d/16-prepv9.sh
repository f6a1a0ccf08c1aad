# prepv9 (session 14, issue 5): GDN prep v9, opt-in LINATTN_CUDA_GDN_PREP=v9 (src/cuda/gdn/gdn_prep_v9.cu,
# gdn_prep_v7_body.cuh; perf-notes "Prep v9"): v8 with value head j + 1's diagonal L / P items and 16x16 solves
# (role 0) formed while the column chains merge head j (X_aa double-buffered in the merge scratch, the merges' finish in
# place), so the L / P phase's critical path is role 1's off-diagonal items instead of role 0's diagonal items and
# solves. Same expressions in the same order: bitwise v8. BT 32 runs v8's kernel. Compiled here, never run on a GPU.
# Prediction (16/64 1x32768): prep 501 -> ~450-475 us (ncu), forward graph ~-25-50 us (1.21 -> ~1.16-1.19 ms);
# 4096x8 ~-2-4%; 16/32 1x32768 (G 2) ~-1-2%.
# 1. bench default vs v9 interleaved, two rounds (16/64 1x32768, 16/64 4096x8), then 16/32 1x32768 once;
# 2. test_cuda_gdn_prep's v9 tests (they set the switch themselves: bitwise vs v8 on short varlen shapes with
#    sentinel rows, GVA 1 / 2 / 4, BT 64 / 32, bf16 / fp16, split v9/s2, tma3 records, P in the fused kernel,
#    backward, training cache; fp64 bars; the switch, 4 CTAs per SM), bitwise ones first;
# 3. test_cuda_graph GDN with LINATTN_CUDA_GDN_PREP=v9 forced (replay with changed lengths = eager bitwise).
# Own clock: P9_SHARE (default 90 s).
p9_t0=$(date +%s)
p9_left() { local a=$(( ${P9_SHARE:-90} - ($(date +%s) - p9_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
p9_cap() { local t=$(( $(p9_left) - 3 )); [ "$t" -gt "$1" ] && t=$1; echo $(( t > 1 ? t : 1 )); }
P9_SW="LINATTN_CUDA_GDN_PREP=v9"
p9_rows0=$( { wc -l <"$OUT/bench.jsonl"; } 2>/dev/null || echo 0)
p9_bench() {  # p9_bench ENV|none HQK HV LENGTHS
  [ "$(p9_left)" -gt 45 ] || { say "prepv9: bench skipped (no time): $*"; return; }
  bench "$(p9_cap 8)" "$1" bench-cuda --hqk "$2" --hv "$3" --lengths "$4" --segments 1 --iters 20 --check 0 \
    --commit "$COMMIT"
}
for p9_round in 1 2; do
  for p9_shape in "16 64 1x32768" "16 64 4096x8"; do
    set -- $p9_shape
    if [ "$p9_round" = 1 ]; then p9_bench none "$@"; p9_bench "$P9_SW" "$@"
    else p9_bench "$P9_SW" "$@"; p9_bench none "$@"; fi
  done
done
p9_bench none 16 32 1x32768
p9_bench "$P9_SW" 16 32 1x32768
tail -n +"$((p9_rows0 + 1))" "$OUT/bench.jsonl" 2>/dev/null | grep '"kind":"case"' | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r.get("mode") not in ("graph-replay", "eager-live"): continue
    print("prepv9 %s/%s %-14s %-26s %-12s p50 %s ms" % (r.get("hqk"), r.get("hv"), r.get("lengths"),
          r.get("env_switch"), r.get("mode"), r.get("p50_ms")))
' >>"$LOG" 2>&1 || true
p9_test() {  # p9_test CAP ENV|none BINARY FILTER
  [ "$(p9_left)" -gt $(( $1 / 2 + 4 )) ] || { say "prepv9: $3 skipped (no time)"; return; }
  echo "### $3 with $2 (filter $4)" >>"$OUT/ab-tests.txt"
  env ${2/#none/} timeout "$(p9_cap "$1")" stdbuf -oL -eL "$BIN/$3" --gtest_brief=1 --gtest_filter="$4" \
    >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then say "PASS $3 ($4) with $2"
  else status=1; say "FAIL $3 ($4) with $2 (exit $rc; 124 = its cap)"; fi
}
p9_test 30 none test_cuda_gdn_prep \
  'CudaGdnPrepV9Occupancy.*:Dtypes/CudaGdnPrepV6.V9SwitchIsRead/*:Dtypes/CudaGdnPrepV6.V7SwitchIsRead/*:Dtypes/CudaGdnPrepV6.V9SameBitsAsV8/*:Dtypes/CudaGdnPrepTma3.V9*'
p9_test 20 none test_cuda_gdn_prep 'Dtypes/CudaGdnPrepV6.V9*-*V9SameBitsAsV8*:*V9SwitchIsRead*'
p9_test 10 "$P9_SW" test_cuda_graph 'CudaGraphGdn*'
true

# prepv8 (session 13, issue 5): GDN prep v8, opt-in LINATTN_CUDA_GDN_PREP=v8 (src/cuda/gdn/gdn_prep_v7.cu,
# gdn_prep_parts.cuh; perf-notes "Prep v8"): v7's body on a swizzled kk / qk layout (conflict-free float4 loads in
# the L / P pass), the Gram epilogue's scales loaded once and stored as pairs, each L / P item's loads before its L
# stores, column chains holding their blocks' sums in registers (chain 0 6 dependent 16x16 products deep, v7 9), and
# role 0's diagonal Ab rows written in the merge phase (off the L / P phase's critical path).
# Same expressions in the same order: bitwise v7. Compiled here, never run on a GPU.
# Prediction (graph replay): 16/64 1x32768 prep ~0.57 -> ~0.50-0.53 ms, forward 1.239 -> ~1.17-1.20 ms;
# 4096x8 ~-4-6%; 16/32 1x32768 ~-4%.
# 1. bench default vs v8 interleaved, two rounds (16/64 1x32768, 16/64 4096x8), then 16/32 1x32768;
# 2. test_cuda_gdn_prep's v8 tests (they set the switch themselves: bitwise vs v7 on short varlen shapes with
#    sentinel rows, GVA 1 / 2 / 4, BT 64 / 32, bf16 / fp16, split v8/s2, tma3 records, P in the fused kernel,
#    backward, training cache; fp64 bars; the switch, 4 CTAs per SM), bitwise ones first;
# 3. test_cuda_graph GDN with LINATTN_CUDA_GDN_PREP=v8 forced (replay with changed lengths = eager bitwise).
# Own clock: ~90 s.
p8_t0=$(date +%s)
p8_left() { local a=$(( ${P8_SHARE:-90} - ($(date +%s) - p8_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
p8_cap() { local t=$(( $(p8_left) - 3 )); [ "$t" -gt "$1" ] && t=$1; echo $(( t > 1 ? t : 1 )); }
P8_SW="LINATTN_CUDA_GDN_PREP=v8"
p8_rows0=$( { wc -l <"$OUT/bench.jsonl"; } 2>/dev/null || echo 0)
p8_bench() {  # p8_bench ENV|none HQK HV LENGTHS
  [ "$(p8_left)" -gt 45 ] || { say "prepv8: bench skipped (no time): $*"; return; }
  bench "$(p8_cap 8)" "$1" bench-cuda --hqk "$2" --hv "$3" --lengths "$4" --iters 20 --check 0 --commit "$COMMIT"
}
for p8_round in 1 2; do
  for p8_shape in "16 64 1x32768" "16 64 4096x8"; do
    set -- $p8_shape
    if [ "$p8_round" = 1 ]; then p8_bench none "$@"; p8_bench "$P8_SW" "$@"
    else p8_bench "$P8_SW" "$@"; p8_bench none "$@"; fi
  done
done
p8_bench none 16 32 1x32768
p8_bench "$P8_SW" 16 32 1x32768
tail -n +"$((p8_rows0 + 1))" "$OUT/bench.jsonl" 2>/dev/null | grep '"kind":"case"' | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r.get("mode") not in ("graph-replay", "eager-live"): continue
    print("prepv8 %s/%s %-14s %-26s %-12s p50 %s ms" % (r.get("hqk"), r.get("hv"), r.get("lengths"),
          r.get("env_switch"), r.get("mode"), r.get("p50_ms")))
' >>"$LOG" 2>&1 || true
p8_test() {  # p8_test CAP ENV|none BINARY FILTER
  [ "$(p8_left)" -gt $(( $1 / 2 + 4 )) ] || { say "prepv8: $3 skipped (no time)"; return; }
  echo "### $3 with $2 (filter $4)" >>"$OUT/ab-tests.txt"
  env ${2/#none/} timeout "$(p8_cap "$1")" stdbuf -oL -eL "$BIN/$3" --gtest_brief=1 --gtest_filter="$4" \
    >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then say "PASS $3 ($4) with $2"
  else status=1; say "FAIL $3 ($4) with $2 (exit $rc; 124 = its cap)"; fi
}
p8_test 30 none test_cuda_gdn_prep \
  'CudaGdnPrepV8Occupancy.*:Dtypes/CudaGdnPrepV6.V7SwitchIsRead/*:Dtypes/CudaGdnPrepV6.V8SameBitsAsV7/*:Dtypes/CudaGdnPrepTma3.V8*'
p8_test 20 none test_cuda_gdn_prep 'Dtypes/CudaGdnPrepV6.V8*-*V8SameBitsAsV7*'
p8_test 10 "$P8_SW" test_cuda_graph 'CudaGraphGdn*'
true

# tier3fold (session 13, issue 12): the tier-3 forward without its combine kernel, opt-in
# LINATTN_CUDA_SEG_COMBINE=fold: each pass-2 CTA (tma3 chain, V-slice 64) walks its own segment's initial state
# (its 64 columns, up to s - 1 steps h = M h + S_loc on mma.sync 3xTF32) in a prologue (src/cuda/gdn/gdn_seg_fold.cuh;
# perf-notes "The combine folded into pass 2"). Compiled here, never run on a GPU.
# Prediction (graph replay, PDL the default): 2/8 1x32768 0.308 -> ~0.297-0.301 ms; 4/16 1x32768 (s = 4, 3 steps) ~-1%.
# 1. FIRST (the deciding rows, ~50 s): bench default vs fold interleaved, two rounds (the order flips in round 2):
#    2/8 and 4/16 1x32768 --segments 0 (the planner's s);
# 2. then the tests (they set the switch themselves): test_cuda_tier3 CudaTier3Fold (bf16 / fp16 BT 64 first, then
#    BT 32), CudaTier3FoldGraph, the switch's errors.
# Own clock: ~90 s in all.
tf_t0=$(date +%s)
tf_left() { local a=$(( 90 - ($(date +%s) - tf_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
tf_cap() { local t=$(( $(tf_left) - 3 )); [ "$t" -gt "$1" ] && t=$1; echo $(( t > 1 ? t : 1 )); }
TF_SW="LINATTN_CUDA_SEG_COMBINE=fold"
tf_rows0=$( { wc -l <"$OUT/bench.jsonl"; } 2>/dev/null || echo 0)
tf_bench() {  # tf_bench ENV|none args...
  local e=$1; shift
  [ "$(tf_left)" -gt 40 ] || { say "tier3fold: bench skipped (no time): $e $*"; return; }
  bench "$(tf_cap 8)" "$e" bench-cuda "$@" --commit "$COMMIT"
}
for tf_round in 1 2; do
  for tf_shape in "2 8" "4 16"; do
    read -r tf_h tf_v <<<"$tf_shape"
    tf_args=(--hqk "$tf_h" --hv "$tf_v" --lengths 1x32768 --segments 0 --iters 30 --check 0)
    if [ "$tf_round" = 1 ]; then tf_bench none "${tf_args[@]}"; tf_bench "$TF_SW" "${tf_args[@]}"
    else tf_bench "$TF_SW" "${tf_args[@]}"; tf_bench none "${tf_args[@]}"; fi
  done
done
tail -n +"$((tf_rows0 + 1))" "$OUT/bench.jsonl" 2>/dev/null | grep '"kind":"case"' | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r.get("mode") not in ("graph-replay", "eager-live"): continue
    print("tier3fold %s/%s %-10s segments %s %-32s %-12s p50 %s ms" % (r.get("hqk"), r.get("hv"), r.get("lengths"),
          r.get("segments"), r.get("env_switch"), r.get("mode"), r.get("p50_ms")))
' >>"$LOG" 2>&1 || true
tf_test() {  # tf_test CAP BINARY FILTER
  [ "$(tf_left)" -gt $(( $1 / 2 + 4 )) ] || { say "tier3fold: $2 ($3) skipped (no time)"; return; }
  echo "### $2 (filter $3)" >>"$OUT/ab-tests.txt"
  timeout "$(tf_cap "$1")" stdbuf -oL -eL "$BIN/$2" --gtest_brief=1 --gtest_filter="$3" >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then say "PASS $2 ($3)"
  else status=1; say "FAIL $2 ($3) (exit $rc; 124 = its cap)"; fi
}
tf_test 15 test_cuda_tier3 'Dtypes/CudaTier3Fold.*bt64:CudaTier3FoldGraph.*:CudaTier3SegCombineSwitch.*'
tf_test 12 test_cuda_tier3 'Dtypes/CudaTier3Fold.*bt32'
say "tier3fold: done"
true

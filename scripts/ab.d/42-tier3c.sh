# tier3c (session 12, issue 12): the tier-3 combine on tensor cores, opt-in LINATTN_CUDA_SEG_COMBINE=tc (16 state
# columns per CTA) / tc8 (8), src/cuda/seg/seg_combine_tc.cu (perf-notes "CUDA tier 3" -> "The combine on tensor
# cores (tier3c, session 12)"). 3xTF32: not bitwise the default (another summation order), held to the reference bars.
# 1. bench-cuda 2/8 and 4/16 1x32768 --segments 0, default vs tc, interleaved, two rounds; tc8 at 2/8 once;
# 2. tests with tc exported (test_cuda_tier3: CudaTier3SegVariants (sets ring2 / tc / tc8 itself: reference, tier 1
#    and default bars) and the switch's errors; test_cuda_tier3_bwd: SegVariantsMatchDefault; test_cuda_tier3_graph
#    GDN: replay = eager fixed bitwise on tc), bf16 BT 64; caps 20 / 16 / 10 s. The full tier-3 suites with
#    LINATTN_CUDA_SEG_COMBINE=tc exported are the lead's follow-up if the bench wins;
# 3. ncu durations of the combine kernels (default, tc), if time is left.
# Own clock: ~90 s.
tc_t0=$(date +%s)
tc_left() { local a=$(( 90 - ($(date +%s) - tc_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
tc_cap() { local t=$(( $(tc_left) - 3 )); [ "$t" -gt "$1" ] && t=$1; echo $(( t > 1 ? t : 1 )); }
TC_SW="LINATTN_CUDA_SEG_COMBINE=tc"
tc_rows0=$( { wc -l <"$OUT/bench.jsonl"; } 2>/dev/null || echo 0)
tc_bench() {  # tc_bench ENV|none args...
  local e=$1; shift
  [ "$(tc_left)" -gt 48 ] || { say "tier3c: bench skipped (no time): $e $*"; return; }
  bench "$(tc_cap 8)" "$e" bench-cuda "$@" --iters 30 --check 0 --segments 0 --commit "$COMMIT"
}
for tc_round in 1 2; do
  for tc_shape in "2 8" "4 16"; do
    read -r tc_h tc_v <<<"$tc_shape"
    tc_bench none --hqk "$tc_h" --hv "$tc_v" --lengths 1x32768
    tc_bench "$TC_SW" --hqk "$tc_h" --hv "$tc_v" --lengths 1x32768
  done
done
tc_bench LINATTN_CUDA_SEG_COMBINE=tc8 --hqk 2 --hv 8 --lengths 1x32768
tail -n +"$((tc_rows0 + 1))" "$OUT/bench.jsonl" 2>/dev/null | grep '"kind":"case"' | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r.get("mode") not in ("graph-replay", "eager-live"): continue
    print("tier3c %s/%s %s segments %s %-32s %-12s p50 %s ms" % (r.get("hqk"), r.get("hv"), r.get("lengths"),
          r.get("segments"), r.get("env_switch"), r.get("mode"), r.get("p50_ms")))
' >>"$LOG" 2>&1 || true
tc_test() {  # tc_test CAP BINARY FILTER
  [ "$(tc_left)" -gt $(( $1 / 2 + 4 )) ] || { say "tier3c: $2 skipped (no time)"; return; }
  echo "### $2 with $TC_SW (filter $3)" >>"$OUT/ab-tests.txt"
  env $TC_SW timeout "$(tc_cap "$1")" stdbuf -oL -eL "$BIN/$2" --gtest_brief=1 --gtest_filter="$3" \
    >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then echo "PASS $2 with $TC_SW" | tee -a "$LOG"
  else status=1; echo "FAIL $2 with $TC_SW (exit $rc)" | tee -a "$LOG"; fi
}
tc_test 20 test_cuda_tier3 'Dtypes/CudaTier3SegVariants.*/bf16_bt64:CudaTier3SegCombineSwitch.*'
tc_test 16 test_cuda_tier3_bwd 'Dtypes/CudaTier3Bwd.SegVariantsMatchDefault/bf16_bt64'
tc_test 10 test_cuda_tier3_graph 'CudaTier3Graph.GdnFwdBwdLayoutsReplayEqualsEagerFixed'
if command -v ncu >/dev/null 2>&1; then  # the combine's duration, one eager call each
  for tc_e in none "$TC_SW"; do
    [ "$(tc_left)" -gt 10 ] || { say "tier3c: ncu skipped (no time)"; break; }
    echo "##### tier3c ncu combine 2/8 1x32768 segments 0 ($tc_e)" | tee -a "$OUT/ab-tests.txt" >>"$LOG"
    timeout "$(tc_cap 10)" env ${tc_e/#none/} ncu --clock-control none --metrics gpu__time_duration.sum \
      --kernel-name regex:"seg_combine" --launch-count 1 \
      "$LA" bench-cuda --hqk 2 --hv 8 --lengths 1x32768 --iters 1 --check 0 --segments 0 2>&1 |
      grep -E "^  [a-zA-Z_].*\(|gpu__time_duration" | tee -a "$OUT/ab-tests.txt" >>"$LOG" || say "tier3c: ncu ($tc_e) exit $?"
  done
fi
say "tier3c: done"
true

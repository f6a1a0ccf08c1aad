# tier3b (session 11, issue 12): opt-in tier-3 variants, all bitwise the default tier 3 by construction
# (perf-notes "CUDA tier 3" -> "Where the 0.338 ms go now, the state pass on tma3's rings, ..."):
#   LINATTN_CUDA_SEG_CHAIN=tma3   the GDN state pass (pass 1) with TMA rings + the prep's scale records
#                                 (gdn_fused_wgp_seg_tma_kernel), no per-thread cp.async / scale math;
#   LINATTN_CUDA_SEG_COMBINE=     ring3: M two steps ahead (three buffers), flags a step ahead; blk: 64 threads
#                                 of 4 x 4 outputs (register blocking); blk3: both.
# 1. tests with tma3 + blk3 exported (test_cuda_tier3: the new CudaTier3SegVariants suite, which sets each
#    variant itself, plus the GDN forward suite at bf16 BT 64; test_cuda_tier3_bwd's new test at two dtype / BT
#    pairs; test_cuda_tier3_graph: graph replay of
#    new layouts = eager fixed bitwise, GDN), caps 20 / 12 / 12 s (~30 s expected);
# 2. bench-cuda 2/8 1x32768 --segments 0 default vs tma3 + blk3, interleaved, two rounds; tma3, ring3, blk
#    alone once each;
#    2/8 1x8192 and 4/16 1x32768 (tier 3 by the planner) and 16/64 1x32768 (the planner keeps tiers 1/2: a
#    no-change check) default vs tma3 + blk3 once each;
# 3. ncu per-kernel durations of one tier-3 call, default and both, if time is left.
# Own clock: ~90 s.
tb_t0=$(date +%s)
tb_left() { local a=$(( 90 - ($(date +%s) - tb_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
tb_cap() { local t=$(( $(tb_left) - 3 )); [ "$t" -gt "$1" ] && t=$1; echo $(( t > 1 ? t : 1 )); }
TB_SW="LINATTN_CUDA_SEG_CHAIN=tma3 LINATTN_CUDA_SEG_COMBINE=blk3"
tb_rows0=$( { wc -l <"$OUT/bench.jsonl"; } 2>/dev/null || echo 0)
tb_test() {  # tb_test CAP BINARY FILTER
  [ "$(tb_left)" -gt $(( $1 / 2 + 5 )) ] || { say "tier3b: $2 skipped (no time)"; return; }
  echo "### $2 with $TB_SW (filter $3)" >>"$OUT/ab-tests.txt"
  env $TB_SW timeout "$(tb_cap "$1")" stdbuf -oL -eL "$BIN/$2" --gtest_brief=1 --gtest_filter="$3" \
    >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then echo "PASS $2 with $TB_SW" | tee -a "$LOG"
  else status=1; echo "FAIL $2 with $TB_SW (exit $rc)" | tee -a "$LOG"; fi
}
tb_test 20 test_cuda_tier3 'Dtypes/CudaTier3SegVariants.*:Dtypes/CudaTier3Fwd.GdnMatchesReferenceAndTier1/bf16_bt64'
tb_test 12 test_cuda_tier3_bwd 'Dtypes/CudaTier3Bwd.SegVariantsBitwiseDefault/bf16_bt64:Dtypes/CudaTier3Bwd.SegVariantsBitwiseDefault/fp16_bt32'
tb_test 12 test_cuda_tier3_graph 'CudaTier3Graph.GdnFwdBwdLayoutsReplayEqualsEagerFixed'
tb_bench() {  # tb_bench ENV|none args...
  local e=$1; shift
  [ "$(tb_left)" -gt 8 ] || { say "tier3b: bench skipped (no time): $e $*"; return; }
  bench "$(tb_cap 8)" "$e" bench-cuda "$@" --iters 30 --check 0 --segments 0 --commit "$COMMIT"
}
for tb_round in 1 2; do
  tb_bench none --hqk 2 --hv 8 --lengths 1x32768
  tb_bench "$TB_SW" --hqk 2 --hv 8 --lengths 1x32768
done
tb_bench LINATTN_CUDA_SEG_CHAIN=tma3 --hqk 2 --hv 8 --lengths 1x32768
tb_bench LINATTN_CUDA_SEG_COMBINE=ring3 --hqk 2 --hv 8 --lengths 1x32768
tb_bench LINATTN_CUDA_SEG_COMBINE=blk --hqk 2 --hv 8 --lengths 1x32768
for tb_shape in "2 8 1x8192" "4 16 1x32768" "16 64 1x32768"; do
  read -r tb_h tb_v tb_l <<<"$tb_shape"
  tb_bench none --hqk "$tb_h" --hv "$tb_v" --lengths "$tb_l"
  tb_bench "$TB_SW" --hqk "$tb_h" --hv "$tb_v" --lengths "$tb_l"
done
tail -n +"$((tb_rows0 + 1))" "$OUT/bench.jsonl" 2>/dev/null | grep '"kind":"case"' | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r.get("mode") not in ("graph-replay", "eager-live"): continue
    print("tier3b %s/%s %s segments %s %-58s %-12s p50 %s ms" % (r.get("hqk"), r.get("hv"), r.get("lengths"),
          r.get("segments"), r.get("env_switch"), r.get("mode"), r.get("p50_ms")))
' >>"$LOG" 2>&1 || true
if command -v ncu >/dev/null 2>&1; then  # kernel durations of one eager call (table .. gather)
  for tb_e in none "$TB_SW"; do
    [ "$(tb_left)" -gt 14 ] || { say "tier3b: ncu skipped (no time)"; break; }
    echo "##### tier3b ncu 2/8 1x32768 segments 0 ($tb_e)" | tee -a "$OUT/ab-tests.txt" >>"$LOG"
    timeout "$(tb_cap 14)" env ${tb_e/#none/} ncu --clock-control none --metrics gpu__time_duration.sum \
      --kernel-name regex:"seg_|gdn_|chunk_meta" --launch-count 7 \
      "$LA" bench-cuda --hqk 2 --hv 8 --lengths 1x32768 --iters 1 --check 0 --segments 0 2>&1 |
      grep -E "^  [a-zA-Z_].*\(|gpu__time_duration" | tee -a "$OUT/ab-tests.txt" >>"$LOG" || say "tier3b: ncu ($tb_e) exit $?"
  done
fi
say "tier3b: done"
true

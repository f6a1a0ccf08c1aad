# GDN forward with P formed in the fused kernel, v2 (LINATTN_CUDA_GDN_P=fused; src/cuda/gdn/gdn_fused_wgp_pf.cuh;
# perf-notes "P formed in the fused kernel, v2"): balanced causal skip of P's blocks (permuted q rows),
# Q K^T issued before the previous chunk's output stores; the prep skips P (WP = false), workspace
# 524 -> 268 MiB at 16/64 1x32768. Prediction: forward 16/64 1x32768 1.581 -> 1.48-1.53 ms graph.
# Compiled only before this run (never on a GPU). This piece
# 1. runs test_cuda_gdn_fused_wg's P-fused cases (reference, mma.sync, prep-P comparisons, host switch),
#    test_cuda_gdn_fwd and the GDN graph tests (replay == eager fixed, bitwise; with LINATTN_CUDA_WGMMA=1 so
#    their short batches take the pipelined kernel) with the switch forced;
# 2. memcheck of the bf16 P-fused reference case, then racecheck of it if time allows (v1: 25 reports
#    on the hand-off buffer);
# 3. benches default vs variant interleaved (--check 1: rel RMS vs the token kernel, graph vs eager):
#    16/64 1x32768, 4096x8, 1x2048, then 1x32768 again with the variant first; then the other shapes a
#    default flip would move: 16/32 1x4096 and 2/8 1x32768 (tier 3, planner's choice).
# Rows into bench.jsonl with env_switch; about 45-60 s of device time.
SW=LINATTN_CUDA_GDN_P=fused
if [ "$(left)" -gt 60 ]; then
  ab_test $SW test_cuda_gdn_fused_wg '*pfused*:*PFused*'
  ab_test $SW test_cuda_gdn_fwd
  # the graph test's batches average < 2 chunks per sequence, where the default takes mma.sync: force the
  # pipelined kernel too, so its six layouts replay the P-forming kernel (graph == eager fixed, bitwise)
  pf_wg_set=${LINATTN_CUDA_WGMMA+set} pf_wg_val=${LINATTN_CUDA_WGMMA-}
  export LINATTN_CUDA_WGMMA=1
  echo "### (next: LINATTN_CUDA_WGMMA=1 exported as well)" >>"$OUT/ab-tests.txt"
  ab_test $SW test_cuda_graph 'CudaGraphGdn*'
  if [ -n "$pf_wg_set" ]; then export LINATTN_CUDA_WGMMA="$pf_wg_val"; else unset LINATTN_CUDA_WGMMA; fi
  PF_CASE='DtypesAndKernels/CudaGdnFusedWg.MatchesReference/bf16_pipelined_pfused'
  for tool in memcheck racecheck; do
    [ "$(left)" -gt 45 ] || { say "gdnfwdp $tool skipped (no time)"; continue; }
    echo "### $tool $SW $PF_CASE" >>"$OUT/ab-tests.txt"
    env $SW LINATTN_SANITIZED=1 timeout "$(cap 25)" compute-sanitizer --tool $tool --error-exitcode 99 \
      "$BIN/test_cuda_gdn_fused_wg" --gtest_filter="$PF_CASE" >>"$OUT/ab-tests.txt" 2>&1
    rc=$?
    [ $tool = memcheck ] && [ $rc -ne 0 ] && status=1
    say "gdnfwdp $tool: exit $rc ($(grep -E '(ERROR|RACECHECK) SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
  done
  for cfg in "16 64 1x32768 none $SW" "16 64 4096x8 none $SW" "16 64 1x2048 none $SW" "16 64 1x32768 $SW none" \
             "16 32 1x4096 none $SW" "2 8 1x32768 none $SW"; do
    set -- $cfg
    for sw in "$4" "$5"; do
      bench 12 "$sw" bench-cuda --hqk "$1" --hv "$2" --lengths "$3" --iters 20 --check 1 --commit "$COMMIT"
    done
  done
else
  say "gdnfwdp skipped (no time)"
fi

# GDN backward sweeps, variants wg3 / wg3p / wg3pf (LINATTN_CUDA_GDN_BWD_SWEEP=wg3 | wg3p | wg3pf;
# src/cuda/gdn/gdn_bwd_sweep_wg.cuh store_warpgroup's kFastDv, gdn_bwd_sweep_wg2.cu; perf-notes "Sweeps: the store
# warpgroup set the reverse step (gdnsweep8)"): wg / wg2 with the store warpgroup's dv stores vectorized (io-type
# dv through the vh staging pass, fp32 dv as float4), wg3pf = wg3p with role 0's input ring streamed by WG1 too;
# the same values as wg. Compiled here, never run on a GPU before this piece.
# 1. tests with wg3 exported, own caps 35 + 20 s: test_cuda_gdn_bwd bf16 BT 64 (wg3 and wg3pf vs fp64 reference and
#    bitwise == wg on every case + a long varlen case; determinism of all three; the graph sequences; wg3p,
#    fp16 and BT 32 are in the full binary), then test_cuda_graph_bwd's GDN / training-cache tests with wg3
#    exported; no bench if a test fails or is cut (exit 124: said so, counted as a failure);
# 2. bench 16/32, interleaved: 1x32768 default / wg3 / wg3p / wg3pf, the same with --saved 1 (training cache),
#    4096x8 and 1x8192 default / wg3 / wg3pf, then round 2 in reverse order while time is left.
# The piece keeps to its own 90 s (gs8_mine: seconds of it left).
GS8=LINATTN_CUDA_GDN_BWD_SWEEP
gs8ok=0
gs8_end=$(( $(date +%s) + 90 ))
gs8_mine() { local m=$(( gs8_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
gs8_test() {  # gs8_test BINARY FILTER CAP: with wg3 exported; sets gs8rc
  echo "### $1 with $GS8=wg3 (filter $2)" >>"$OUT/ab-tests.txt"
  env $GS8=wg3 timeout "$(cap "$3")" stdbuf -oL -eL "$BIN/$1" --gtest_brief=1 --gtest_filter="$2" \
    >>"$OUT/ab-tests.txt" 2>&1
  gs8rc=$?
}
if [ "$(gs8_mine)" -gt 60 ]; then
  gs8_test test_cuda_gdn_bwd 'Dtypes/CudaGdnBwd.SweepWg3MatchesReferenceAndWgBitwise/bf16_bt64:Dtypes/CudaGdnBwd.SweepWg3pfMatchesReferenceAndWgBitwise/bf16_bt64:Dtypes/CudaGdnBwd.SweepWg3IsDeterministic/bf16_bt64:CudaGdnBwdSweepWg.Wg3GraphSequence' 35
  if [ $gs8rc -eq 0 ]; then
    gs8_test test_cuda_graph_bwd 'CudaGraphGdn*:CudaGraphFwdBwd.*' 20
    if [ $gs8rc -eq 0 ]; then
      gs8ok=1; say "PASS test_cuda_gdn_bwd + test_cuda_graph_bwd GDN with $GS8=wg3 (wg3p in SweepWg3*)"
    else
      status=1; say "FAIL test_cuda_graph_bwd GDN with $GS8=wg3 (exit $gs8rc; 124 = the 20 s cap): no bench"
    fi
  else
    status=1; say "FAIL test_cuda_gdn_bwd with $GS8=wg3 (exit $gs8rc; 124 = the 35 s cap): no bench"
  fi
else
  say "gdnsweep8 wg3 tests skipped (no time)"
fi
gs8_bench() {  # gs8_bench SWITCH linattn-args...: one row while the piece has >= 6 s left
  local sw=$1
  shift
  [ "$(gs8_mine)" -gt 6 ] || { say "gdnsweep8 bench $sw $* skipped (piece time spent)"; return; }
  bench $(( $(gs8_mine) < 20 ? $(gs8_mine) : 20 )) "$sw" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --iters 10 \
    --commit "$COMMIT" "$@"
}
if [ $gs8ok = 1 ]; then
  for sw in none $GS8=wg3 $GS8=wg3p $GS8=wg3pf; do gs8_bench "$sw" --lengths 1x32768; done
  for sw in none $GS8=wg3 $GS8=wg3pf; do gs8_bench "$sw" --lengths 1x32768 --saved 1; done
  for sw in none $GS8=wg3 $GS8=wg3pf; do gs8_bench "$sw" --lengths 4096x8; done
  for sw in none $GS8=wg3 $GS8=wg3pf; do gs8_bench "$sw" --lengths 1x8192; done
  for sw in $GS8=wg3pf $GS8=wg3p $GS8=wg3 none; do gs8_bench "$sw" --lengths 1x32768; done
  for sw in $GS8=wg3pf $GS8=wg3 none; do gs8_bench "$sw" --lengths 1x32768 --saved 1; done
  for sw in $GS8=wg3pf $GS8=wg3 none; do gs8_bench "$sw" --lengths 4096x8; done
  for sw in $GS8=wg3pf $GS8=wg3 none; do gs8_bench "$sw" --lengths 1x8192; done
  say "gdnsweep8 bench done (bench.jsonl rows tagged env_switch)"
fi
true

# GDN backward sweeps on wgmma (LINATTN_CUDA_GDN_BWD_SWEEP=wg | wglate; gdn_bwd_sweep_wg.cu; perf-notes
# "Sweeps on wgmma"): the open question before it can be the default is racecheck's 20 hazards on its
# fragment hand-off (gdnbwd5 run at d696179; every test passed). This piece
# 1. runs the SweepWg tests with wglate (the store warpgroup's "empty" arrive moved after its stores,
#    not yet run on a GPU) and racecheck of the same test with wg and with wglate (sanitized size);
# 2. racecheck of the default forward's pipelined kernel on its 3-chunk case (the same hand-off
#    protocol; does the tool flag it today?);
# 3. benches mma vs the default (wg where sequences average >= 2048 tokens) vs wglate at 16/32 1x32768
#    and 512x16.
# Since b6a615e wg is the default for long sequences (the racecheck question stays open: perf-notes).
# Rows into bench.jsonl with env_switch; about 60-90 s of device time.
SW=LINATTN_CUDA_GDN_BWD_SWEEP
ab_test $SW=wglate test_cuda_gdn_bwd 'Dtypes/CudaGdnBwd.SweepWg*:CudaGdnBwdSweepWg.*'
for v in wg wglate; do
  [ "$(left)" -gt 40 ] || { say "racecheck $SW=$v skipped (no time)"; continue; }
  echo "### racecheck $SW=$v SweepWgMatchesReferenceAndMmaSweeps/bf16_bt64" >>"$OUT/ab-tests.txt"
  env $SW=$v LINATTN_SANITIZED=1 timeout "$(cap 30)" compute-sanitizer --tool racecheck --error-exitcode 99 \
    "$BIN/test_cuda_gdn_bwd" --gtest_filter='Dtypes/CudaGdnBwd.SweepWgMatchesReferenceAndMmaSweeps/bf16_bt64' \
    >>"$OUT/ab-tests.txt" 2>&1
  say "racecheck $SW=$v: exit $? ($(grep 'RACECHECK SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
done
if [ -x "$BIN/test_cuda_gdn_fused_wg" ] && [ "$(left)" -gt 60 ]; then
  echo "### racecheck test_cuda_gdn_fused_wg MatchesReference/bf16_pipelined (default pipelined forward)" >>"$OUT/ab-tests.txt"
  LINATTN_SANITIZED=1 timeout "$(cap 45)" compute-sanitizer --tool racecheck --error-exitcode 99 \
    "$BIN/test_cuda_gdn_fused_wg" --gtest_filter='*MatchesReference/bf16_pipelined' >>"$OUT/ab-tests.txt" 2>&1
  say "racecheck pipelined forward: exit $? ($(grep 'RACECHECK SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
fi
for len in 1x32768 512x16; do
  for sw in $SW=mma none $SW=wglate; do
    bench 20 "$sw" bench-cuda-bwd --hqk 16 --hv 32 --lengths $len --iters 10 --commit "$COMMIT"
  done
done

# GDN backward sweeps, variant wg2 (LINATTN_CUDA_GDN_BWD_SWEEP=wg2; src/cuda/gdn/gdn_bwd_sweep_wg2.cu;
# perf-notes "Sweeps: the chain warpgroup left only the chain (wg2)"): WG1 streams role 1's input ring
# and scales, WG0 issues dS^T K^T first, every hand-off on mbarriers. Compiled here, never run on a GPU
# before this piece. This piece
# 1. runs the wg2 tests at BT 64 (fp64 reference, bitwise == wg, determinism, graph == eager; ~20 s)
#    with the switch exported; own cap (a protocol bug would hang rather than fail), and nothing else
#    of wg2 runs if they fail;
# 2. racecheck of wg2 on the sanitized varlen case (mma.sync sweeps + wg2 only: wg's own report does
#    not mix in), the question left open for wg's named-barrier hand-off;
# 3. benches the default (wg at these lengths) vs wg2 interleaved at 16/32 1x32768 and 4096x8, then
#    1x32768 again in the other order;
# 4. tier 3's dS-only stage (role 1 alone) through wg2 if the piece's time is not spent.
# Rows into bench.jsonl with env_switch. The piece keeps to its own 60 s (mine: seconds of it left).
SW=LINATTN_CUDA_GDN_BWD_SWEEP
wg2ok=0
piece_end=$(( $(date +%s) + 60 ))
mine() { local m=$(( piece_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
if [ "$(left)" -gt 40 ]; then
  F='Dtypes/CudaGdnBwd.SweepWg2*/*_bt64:CudaGdnBwdSweepWg.Wg2GraphSequence'
  echo "### test_cuda_gdn_bwd with $SW=wg2 (filter $F)" >>"$OUT/ab-tests.txt"
  env $SW=wg2 timeout "$(cap 35)" stdbuf -oL -eL "$BIN/test_cuda_gdn_bwd" --gtest_brief=1 --gtest_filter="$F" \
    >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then wg2ok=1; say "PASS test_cuda_gdn_bwd with $SW=wg2"; else status=1; say "FAIL test_cuda_gdn_bwd with $SW=wg2 (exit $rc): no racecheck / bench of wg2"; fi
else
  say "wg2 tests skipped (no time)"
fi
if [ $wg2ok = 1 ] && [ "$(mine)" -gt 30 ]; then
  echo "### racecheck $SW=wg2 SweepWgMatchesReferenceAndMmaSweeps/bf16_bt64" >>"$OUT/ab-tests.txt"
  env $SW=wg2 LINATTN_SANITIZED=1 timeout "$(cap 12)" compute-sanitizer --tool racecheck --error-exitcode 99 \
    "$BIN/test_cuda_gdn_bwd" --gtest_filter='Dtypes/CudaGdnBwd.SweepWgMatchesReferenceAndMmaSweeps/bf16_bt64' \
    >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  say "racecheck $SW=wg2: exit $rc ($(grep 'RACECHECK SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
fi
if [ $wg2ok = 1 ]; then  # (len, switch) pairs, interleaved; each while the piece has >= 8 s left
  for run in "1x32768 none" "1x32768 $SW=wg2" "4096x8 none" "4096x8 $SW=wg2" "1x32768 $SW=wg2" "1x32768 none"; do
    [ "$(mine)" -gt 8 ] || { say "gdnbwdsweep bench $run skipped (piece time spent)"; continue; }
    bench $(( $(mine) < 12 ? $(mine) : 12 )) "${run#* }" bench-cuda-bwd --hqk 16 --hv 32 --lengths "${run%% *}" \
      --iters 10 --commit "$COMMIT"
  done
fi
if [ $wg2ok = 1 ] && [ -x "$BIN/test_cuda_tier3_bwd" ] && [ "$(mine)" -gt 10 ]; then
  echo "### test_cuda_tier3_bwd with $SW=wg2 (filter *Gdn*)" >>"$OUT/ab-tests.txt"
  env $SW=wg2 timeout "$(cap 10)" "$BIN/test_cuda_tier3_bwd" --gtest_brief=1 --gtest_filter='*Gdn*' >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then say "PASS test_cuda_tier3_bwd with $SW=wg2"; else status=1; say "FAIL test_cuda_tier3_bwd with $SW=wg2 (exit $rc)"; fi
fi

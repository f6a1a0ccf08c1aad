# GDN prep v6 (LINATTN_CUDA_GDN_PREP=v6; src/cuda/gdn/gdn_prep.cu, gdn_prep_common.cuh, gdn_prep_v6.h; perf-notes
# "Prep v6: four CTAs per SM, interleaved row scales, fewer barriers"): the default prep's arithmetic with kk's lower
# blocks packed (4 CTAs per SM instead of 3), the q / k row scales of a warp's 16 rows interleaved, the inverse
# merged by column chains, a value head's Ab stores beside the next head's L (3 CTA barriers per head, not 6).
# Bitwise the default's outputs. Compiled here, never run on a GPU before this piece. Prediction: prep 0.69 ->
# ~0.50-0.58 ms, forward 16/64 1x32768 graph ~1.44 -> ~1.30-1.36 ms, 1x2048 0.122 -> ~0.10 (one prep wave).
# 1. test_cuda_gdn_prep (its tests set the switch themselves: fp64 reference, bitwise == default incl. P fused,
#    tma3 records, the backward and the training cache, 4 CTAs per SM); with v6 forced: the GDN graph tests and
#    test_cuda_graph_bwd's training-cache replay; memcheck of one case when >= 50 s are left; no bench if
#    test_cuda_gdn_prep fails. (Longer: test_cuda_saved / test_cuda_gdn_bwd with LINATTN_CUDA_GDN_PREP=v6.)
# 2. bench default vs v6 interleaved (16/64 1x32768, 4096x8, 1x2048; --check 1), a second round with the
#    variant first. Rows into bench.jsonl with env_switch. Own 90 s.
gpsw=LINATTN_CUDA_GDN_PREP
gpok=0
gpend=$(( $(date +%s) + 90 ))
gpleft() { local m=$(( gpend - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
gptest() {  # gptest CAP BINARY FILTER: with v6 forced
  [ "$(gpleft)" -gt $(( $1 + 30 )) ] || { say "gdnprep: $2 skipped (no time)"; return; }
  echo "### $2 ($3) with $gpsw=v6" >>"$OUT/ab-tests.txt"
  env $gpsw=v6 timeout "$(cap "$1")" stdbuf -oL -eL "$BIN/$2" --gtest_brief=1 --gtest_filter="$3" >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then say "PASS $2 ($3) with $gpsw=v6"; else status=1; say "FAIL $2 ($3) with $gpsw=v6 (exit $rc)"; fi
}
if [ "$(gpleft)" -gt 60 ] && [ -x "$BIN/test_cuda_gdn_prep" ]; then
  echo "### test_cuda_gdn_prep (the tests set $gpsw themselves)" >>"$OUT/ab-tests.txt"
  timeout "$(cap 40)" stdbuf -oL -eL "$BIN/test_cuda_gdn_prep" --gtest_brief=1 >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    gpok=1; say "PASS test_cuda_gdn_prep"
  else
    status=1; say "FAIL test_cuda_gdn_prep (exit $rc; 124 = the 40 s cap): no bench of v6"
  fi
  if [ $gpok = 1 ]; then
    gptest 8 test_cuda_graph 'CudaGraphGdn*'
    gptest 6 test_cuda_graph_bwd 'CudaGraphFwdBwd.TrainingCacheReplayEqualsEagerWithoutCache'
  fi
  if [ $gpok = 1 ] && [ "$(gpleft)" -gt 50 ] && command -v compute-sanitizer >/dev/null 2>&1; then
    gpmc='Dtypes/CudaGdnPrepV6.SameBitsAsDefault/bf16_bt64'
    echo "### memcheck $gpmc" >>"$OUT/ab-tests.txt"
    LINATTN_SANITIZED=1 timeout "$(cap 10)" compute-sanitizer --tool memcheck --error-exitcode 99 \
      "$BIN/test_cuda_gdn_prep" --gtest_filter="$gpmc" >>"$OUT/ab-tests.txt" 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && status=1
    say "gdnprep memcheck: exit $rc (124 = cut by its cap) ($(grep -E 'ERROR SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
  fi
else
  say "gdnprep tests skipped (no time or no test_cuda_gdn_prep binary)"
fi
if [ $gpok = 1 ]; then  # one switch per run, interleaved; each while the piece has >= 6 s left
  gpv=$gpsw=v6
  for gprow in "1x32768 none" "1x32768 $gpv" "4096x8 none" "4096x8 $gpv" "1x2048 none" "1x2048 $gpv" \
               "1x32768 $gpv" "1x32768 none" "4096x8 $gpv" "4096x8 none" "1x2048 $gpv" "1x2048 none"; do
    set -- $gprow
    [ "$(gpleft)" -gt 6 ] || { say "gdnprep bench $gprow skipped (piece time spent)"; continue; }
    gpc=$(( $(gpleft) < 20 ? $(gpleft) : 20 ))
    bench $gpc "$2" bench-cuda --hqk 16 --hv 64 --lengths "$1" --segments 1 --iters 20 --check 1 --commit "$COMMIT"
  done
fi
true

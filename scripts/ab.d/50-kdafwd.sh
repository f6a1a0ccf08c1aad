# KDA prep v7 (LINATTN_KDA_PREP=v7, src/cuda/kda/kda_fwd_prep_v7.cu; opt-in, v6 is the default): v6's
# code with q / k read from global memory so three 8-warp CTAs fit per SM (perf-notes "Prep v7").
# 1. the KDA forward bench 32/32 at 1x32768 and 4096x8, v6 (default, env_switch none) and v7
#    interleaved, round 1 with --check 1 (rel RMS vs the token kernel: a wrong v7 shows here too);
# 2. with v7 forced: test_cuda_kda_fwd's v7 cases (every case vs the fp64 reference, vs v6 and v3,
#    every mma.sync V-slice, three CTAs per SM), the KDA graph tests (replay == eager bitwise over six
#    layouts with NaN padding), the chunked KDA backward's BT-64 reference case (it reruns the prep);
# 3. compute-sanitizer memcheck of one small v7 case;
# 4. ncu of the v6 and v7 preps at 1x32768 (issue rate, occupancy, warp-state stall split);
# 5. bench round 2 (--check 0).
# Own share: 60 s of device time (kf7_left); each step is skipped when it would not fit (tests and
# ncu before the second bench round).
kf7_t0=$(date +%s)
kf7_left() { echo $(( 60 - ($(date +%s) - kf7_t0) )); }
kf7_bench() {  # kf7_bench CHECK: one round, v6 (none) then v7 per shape
  local len sw
  for len in 1x32768 4096x8; do
    for sw in none LINATTN_KDA_PREP=v7; do
      [ "$(kf7_left)" -gt 6 ] || { say "kdafwd7: bench skipped (share spent): $sw $len check $1"; continue; }
      bench 10 "$sw" bench-cuda --op kda --hqk 32 --hv 32 --lengths "$len" --iters 20 --check "$1" --commit "$COMMIT"
    done
  done
}
kf7_bench 1
[ "$(kf7_left)" -gt 30 ] &&
  ab_test LINATTN_KDA_PREP=v7 test_cuda_kda_fwd '*PrepV7*bt64:CudaKdaFwdPrepV7.*'
[ "$(kf7_left)" -gt 24 ] &&
  ab_test LINATTN_KDA_PREP=v7 test_cuda_graph 'CudaGraphKdaFwd.*'
[ "$(kf7_left)" -gt 20 ] &&
  ab_test LINATTN_KDA_PREP=v7 test_cuda_kda_bwd_chunked '*MatchesReferenceAndTokenPath/bf16_bt64'
if [ "$(kf7_left)" -gt 17 ] && command -v compute-sanitizer >/dev/null 2>&1; then
  echo "### memcheck LINATTN_KDA_PREP=v7 PrepV7EveryVSlice/bf16_bt64" >>"$OUT/ab-tests.txt"
  env LINATTN_KDA_PREP=v7 LINATTN_SANITIZED=1 timeout "$(cap 15)" compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$BIN/test_cuda_kda_fwd" --gtest_filter='Dtypes/CudaKdaFwd.PrepV7EveryVSlice/bf16_bt64' >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || status=1
  say "kdafwd7: memcheck v7 exit $rc ($(grep 'ERROR SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
fi
if [ "$(kf7_left)" -gt 20 ] && command -v ncu >/dev/null 2>&1; then
  for sw in none LINATTN_KDA_PREP=v7; do
    [ "$(kf7_left)" -gt 10 ] || break
    echo "### ncu kda prep $sw" >>"$OUT/ab-tests.txt"
    env ${sw/#none/} CUDA_VISIBLE_DEVICES=0 timeout "$(cap 10)" ncu --clock-control none --kernel-name regex:kda_prep \
      --launch-skip 1 --launch-count 1 --section SpeedOfLight --section Occupancy --section SchedulerStats \
      --section WarpStateStats "$LA" bench-cuda --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 1 --check 0 \
      >>"$OUT/ab-tests.txt" 2>&1 || say "kdafwd7: ncu $sw incomplete"
  done
fi
kf7_bench 0
true

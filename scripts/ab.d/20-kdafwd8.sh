# KDA prep v8 / v8p (LINATTN_KDA_PREP=v8 / v8p, src/cuda/kda/kda_fwd_prep_v8.cu; opt-in, v6 is the
# default): v6's products with fewer shared-memory passes per element (one staging item per thread
# through all six levels, float4 conflict-free L / P / Ab passes, gate cumsum kept in registers); v8p
# also prefetches a later chunk's inputs into L2 (perf-notes "Prep v8").
# 1. bench round 1 (--check 1: rel RMS vs the token kernel, so a wrong v8 shows here too): KDA forward
#    32/32 1x32768, then 4096x8, then 1x4096, v6 (default, env_switch none), v8, v8p interleaved;
# 2. with v8 forced: test_cuda_kda_fwd's chunked cases (every case vs the fp64 reference, every
#    V-slice) and the v8 / v8p cases (vs the reference, v6, v3; a long varlen case that reaches the
#    prefetch; two CTAs per SM), the KDA graph tests (replay == eager bitwise), the chunked KDA
#    backward's BT-64 reference case (it reruns the forward prep);
# 3. compute-sanitizer memcheck of one small case with v8 forced (varlen edges, mma.sync V-slices 32 / 64);
# 4. bench round 2 (--check 0), then racecheck of the same case if the share allows.
# Own share: 90 s of device time (kf8_left); each step is skipped when it would not fit.
kf8_t0=$(date +%s)
kf8_left() { echo $(( 90 - ($(date +%s) - kf8_t0) )); }
kf8_bench() {  # kf8_bench CHECK: one round, v6 (none), v8, v8p per shape
  local len sw
  for len in 1x32768 4096x8 1x4096; do
    for sw in none LINATTN_KDA_PREP=v8 LINATTN_KDA_PREP=v8p; do
      [ "$(kf8_left)" -gt 5 ] || { say "kdafwd8: bench skipped (share spent): $sw $len check $1"; continue; }
      bench 25 "$sw" bench-cuda --op kda --hqk 32 --hv 32 --lengths "$len" --iters 20 --check "$1" --commit "$COMMIT"
    done
  done
}
kf8_bench 1
[ "$(kf8_left)" -gt 50 ] &&
  ab_test LINATTN_KDA_PREP=v8 test_cuda_kda_fwd \
    '*ChunkedKernelsMatchReference/*bt64:*ChunkedEveryVSlice/bf16_bt64:*PrepV8*/bf16_bt64:CudaKdaFwdPrepV8.*'
[ "$(kf8_left)" -gt 40 ] &&
  ab_test LINATTN_KDA_PREP=v8 test_cuda_graph 'CudaGraphKdaFwd.*'
[ "$(kf8_left)" -gt 34 ] &&
  ab_test LINATTN_KDA_PREP=v8 test_cuda_kda_bwd_chunked '*MatchesReferenceAndTokenPath/bf16_bt64'
if [ "$(kf8_left)" -gt 30 ] && command -v compute-sanitizer >/dev/null 2>&1; then
  echo "### memcheck LINATTN_KDA_PREP=v8 ChunkedEveryVSlice/bf16_bt64" >>"$OUT/ab-tests.txt"
  env LINATTN_KDA_PREP=v8 LINATTN_SANITIZED=1 timeout "$(cap 18)" compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$BIN/test_cuda_kda_fwd" --gtest_filter='Dtypes/CudaKdaFwd.ChunkedEveryVSlice/bf16_bt64' >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 124 ] || status=1  # 124: cut by the cap (incomplete, not a finding)
  say "kdafwd8: memcheck v8 exit $rc ($(grep 'ERROR SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
fi
kf8_bench 0
if [ "$(kf8_left)" -gt 20 ] && command -v compute-sanitizer >/dev/null 2>&1; then
  echo "### racecheck LINATTN_KDA_PREP=v8 ChunkedEveryVSlice/bf16_bt64" >>"$OUT/ab-tests.txt"
  env LINATTN_KDA_PREP=v8 LINATTN_SANITIZED=1 timeout "$(cap 18)" compute-sanitizer --tool racecheck --error-exitcode 99 \
    "$BIN/test_cuda_kda_fwd" --gtest_filter='Dtypes/CudaKdaFwd.ChunkedEveryVSlice/bf16_bt64' >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 124 ] || status=1  # 124: cut by the cap (incomplete, not a finding)
  say "kdafwd8: racecheck v8 exit $rc ($(grep 'RACECHECK SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
fi
true

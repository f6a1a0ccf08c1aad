# KDA prep v9 (LINATTN_KDA_PREP=v9, src/cuda/kda/kda_fwd_prep_v8_body.cuh with kV9 +
# kda_fwd_prep_v9_parts.cuh; opt-in, v8 is the default): v8's body with a shorter gate phase (gate-form
# constants loaded before the chunk table chain, beta loaded with the gate loads, gate loads before the
# q / k copies, the gate formed in log2 units, the norm pass in the gam fix-up's phase: one barrier
# fewer) (perf-notes "Prep v9").
# 1. bench round 1 (--check 1: rel RMS vs the token kernel): KDA forward 32/32 1x32768, then 4096x8,
#    v8 (default, env_switch none) and v9 interleaved;
# 2. with v9 forced: test_cuda_kda_fwd's chunked bt64 cases and the v9 cases (vs the fp64 reference,
#    v8, v3; long varlen; mma.sync V-slices; two CTAs per SM), the KDA graph tests (replay == eager
#    bitwise), the chunked KDA backward's BT-64 reference case (it reruns the forward prep);
# 3. compute-sanitizer memcheck of PrepV9EveryVSlice/bf16_bt64 (varlen edges, -1000 gates);
# 4. bench round 2 (--check 0), then racecheck of the same case if the share allows.
# Own share: 90 s of device time (kf10_left, never more than the global left); each step is skipped
# when it would not fit.
kf10_t0=$(date +%s)
kf10_left() { local a=$(( 90 - ($(date +%s) - kf10_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
kf10_bench() {  # kf10_bench CHECK: one round, v8 (none) then v9 per shape
  local len sw
  for len in 1x32768 4096x8; do
    for sw in none LINATTN_KDA_PREP=v9; do
      [ "$(kf10_left)" -gt 8 ] || { say "kdafwd10: bench skipped (share spent): $sw $len check $1"; continue; }
      bench 20 "$sw" bench-cuda --op kda --hqk 32 --hv 32 --lengths "$len" --iters 20 --check "$1" --commit "$COMMIT"
    done
  done
}
kf10_san() {  # kf10_san TOOL CAP: one sanitizer run of the v9 V-slice case
  [ "$(kf10_left)" -gt $(( $2 + 3 )) ] && command -v compute-sanitizer >/dev/null 2>&1 ||
    { say "kdafwd10: $1 skipped (no time or no compute-sanitizer)"; return; }
  echo "### $1 LINATTN_KDA_PREP=v9 PrepV9EveryVSlice/bf16_bt64" >>"$OUT/ab-tests.txt"
  env LINATTN_KDA_PREP=v9 LINATTN_SANITIZED=1 timeout "$(cap "$2")" compute-sanitizer --tool "$1" --error-exitcode 99 \
    "$BIN/test_cuda_kda_fwd" --gtest_brief=1 --gtest_filter='Dtypes/CudaKdaFwd.PrepV9EveryVSlice/bf16_bt64' \
    >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 124 ] || status=1  # 124: cut by the cap (incomplete, not a finding)
  say "kdafwd10: $1 v9 exit $rc ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
}
kf10_bench 1
[ "$(kf10_left)" -gt 55 ] &&
  ab_test LINATTN_KDA_PREP=v9 test_cuda_kda_fwd \
    '*ChunkedKernelsMatchReference/*bt64:*PrepV9*/*bt64:CudaKdaFwdPrepV9.*:CudaKdaFwdDefault.*'
[ "$(kf10_left)" -gt 42 ] &&
  ab_test LINATTN_KDA_PREP=v9 test_cuda_graph 'CudaGraphKdaFwd.*'
[ "$(kf10_left)" -gt 36 ] &&
  ab_test LINATTN_KDA_PREP=v9 test_cuda_kda_bwd_chunked '*MatchesReferenceAndTokenPath/bf16_bt64'
kf10_san memcheck 16
kf10_bench 0
kf10_san racecheck 16
true

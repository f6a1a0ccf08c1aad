# KDA prep v6 (LINATTN_KDA_PREP=v6, src/cuda/kda/kda_fwd_prep_v6.cu; opt-in, v5 is the default):
# 1. the KDA forward bench 32/32 at 1x32768, 1x4096, 4096x8, v5 (the default, env_switch none) and v6
#    interleaved, round 1 (with --check 1: rel RMS vs the token kernel, so a wrong v6 shows here too);
# 2. with v6 forced, at BT 64 (BT 32 keeps prep v3): the forward's chunked cases (every case vs the
#    fp64 reference, every V-slice, v6 vs v5), the chunked KDA backward (it recomputes the forward
#    prep; the all-gates-at-the-limits case included) and tier 3's KDA cases;
# 3. bench round 2 (--check 0).
# Own share: ~70 s of device time (kda6_left); each step is skipped when it would not fit.
kda6_t0=$(date +%s)
kda6_left() { echo $(( 70 - ($(date +%s) - kda6_t0) )); }
kda6_bench() {  # kda6_bench CHECK: one round, v5 (none) then v6 per shape
  local len sw
  for len in 1x32768 1x4096 4096x8; do
    for sw in none LINATTN_KDA_PREP=v6; do
      [ "$(kda6_left)" -gt 6 ] || { say "kdaprep6: bench skipped (share spent): $sw $len check $1"; continue; }
      bench 12 "$sw" bench-cuda --op kda --hqk 32 --hv 32 --lengths "$len" --iters 20 --check "$1" --commit "$COMMIT"
    done
  done
}
kda6_bench 1
[ "$(kda6_left)" -gt 35 ] &&
  ab_test LINATTN_KDA_PREP=v6 test_cuda_kda_fwd '*ChunkedKernelsMatchReference/*bt64:*ChunkedEveryVSlice/*bt64:*PrepV6*bt64'
[ "$(kda6_left)" -gt 25 ] &&
  ab_test LINATTN_KDA_PREP=v6 test_cuda_kda_bwd_chunked '*MatchesReferenceAndTokenPath/*bt64:*AllGatesAtTheLimits*'
[ "$(kda6_left)" -gt 15 ] &&
  ab_test LINATTN_KDA_PREP=v6 test_cuda_tier3 '*KdaMatchesReferenceAndTier1/*bt64*:*SegKernel*bt64*'
kda6_bench 0
true

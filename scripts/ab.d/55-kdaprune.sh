# KDA backward prune (kdaprune, session 10; perf-notes "CUDA KDA backward" -> "Pruned (session 10)"): chunked7 is
# the one chunk-gradient kernel, chunked .. chunked6 / chunked8 / chunked9 removed, a removed
# LINATTN_CUDA_KDA_BWD value is an invalid-argument error at plan time. The chunked7 kernels' SASS is unchanged
# (bench/results/sass-identity-20261201-kdaprune.txt), so no bench: this piece only runs the tests.
# Own clock 90 s, every step guarded:
# 1. test_cuda_kda_bwd_chunked, the whole binary (the variant loops are gone: one GPU backward per case where
#    there were up to nine; the CPU fp64 references remain): fp64 reference, token path, chunked7 == chunked bitwise, determinism, extreme
#    gates, public op, graph, and RemovedModeIsRejectedAtPlanTime;
# 2. test_cuda_kda_bwd (the token path's own binary, LINATTN_CUDA_KDA_BWD=token) if time is left.
# Keep rule: both PASS -> merge; a FAIL of RemovedModeIsRejectedAtPlanTime alone means the message wording.
kp_t0=$(date +%s)
kp_left() { local a=$(( 90 - ($(date +%s) - kp_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
kp_test() {  # kp_test CAP SWITCH BINARY: the whole binary under the piece's own cap
  local c=$1 sw=$2 t=$3 rc
  [ "$(kp_left)" -gt $(( c / 2 )) ] || { say "kdaprune: $t skipped (no time)"; return; }
  [ "$(kp_left)" -lt "$c" ] && c=$(kp_left)
  echo "### $t with $sw" >>"$OUT/ab-tests.txt"
  env "$sw" timeout "$(cap "$c")" stdbuf -oL -eL "$BIN/$t" --gtest_brief=1 >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then echo "PASS $t with $sw" | tee -a "$LOG"
  else status=1; echo "FAIL $t with $sw (exit $rc$([ $rc -eq 124 ] && echo ', cut at its cap'))" | tee -a "$LOG"; fi
}
kp_test 70 LINATTN_CUDA_KDA_BWD=chunked test_cuda_kda_bwd_chunked
kp_test 30 LINATTN_CUDA_KDA_BWD=token test_cuda_kda_bwd
true

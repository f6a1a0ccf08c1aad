# KDA backward chunk kernel chunked14 (LINATTN_CUDA_KDA_BWD=chunked14; opt-in, kda/kda_bwd_chunk14.cu = SPLIT + GC12 +
# C13 + C14 of kda_bwd_chunk2_kernel.cuh, pieces in kda_bwd_chunk14_parts.cuh; perf-notes "chunked14"): chunked13 with
# (1) eg / egl in 8 row steps each through a shared 8-row window (chunked13: 16 + 15 dependent steps per warp);
# (2) the split-TF32 lo parts of the off-diagonal / square blocks truncated by the mask ((x - hi) & 0xffffe000) instead
# of cvt.rna (emulated on sm_90), ~150 splits per warp and head; (3) S / dS loaded last as their own cp.async group, Y,
# Y.v and blk computed while they stream. Not bitwise chunked13 ((1) and (2)): the tests hold it to the fp64
# reference's bars and chunked13's, and print both kernels' rel RMS per case. Compiled here, never run on a GPU.
# Prediction: chunk kernel -3 to -6%, backward 32/32 1x32768 --saved 1 7.76 -> ~7.45-7.6 ms, fwd+bwd graph 9.59 ->
# ~9.3-9.45 ms.
# This piece (its own clock, 90 s; every step guarded):
# 1. bench default vs chunked14, bench-cuda-bwd KDA 32/32 1x32768 --iters 5 --saved 1, two rounds interleaved;
# 2. test_cuda_kda_bwd_chunked's *Chunked14* tests (every case of bf16 BT 64 and fp16 BT 32 against the reference and
#    chunked13, '[kdabwd14] ... rel_rms' lines; -1000 / -5 gates at BT 64 / 32; graph replay == eager fixed) + the
#    mode test.
# Flip rule: tests pass, the [kdabwd14] rel RMS of dA_log / ddt_bias / dg within ~2x chunked13's, chunked14 faster in
# both rounds -> gdn_bwd.cc route: chunked14's kernel for the default (chunked13 kept selectable).
K14=LINATTN_CUDA_KDA_BWD
k14_t0=$(date +%s)
k14_left() { local a=$(( 90 - ($(date +%s) - k14_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
k14_b() {  # k14_b SWITCH
  local l; l=$(k14_left)
  [ "$l" -gt 36 ] || { say "kdabwd14 bench $1 skipped (piece time spent)"; return; }
  bench $(( l < 46 ? l - 30 : 16 )) "$1" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1 \
    --commit "$COMMIT"
}
k14_b none; k14_b $K14=chunked14; k14_b $K14=chunked14; k14_b none
if [ "$(k14_left)" -gt 10 ]; then
  k14_f='*Chunked14MatchesReferenceAndChunked13/bf16_bt64:*Chunked14MatchesReferenceAndChunked13/fp16_bt32'
  k14_f="$k14_f:*Chunked14AllGatesAtTheLimits:*Chunked14ReplayEqualsEagerFixed:*RemovedModeIsRejectedAtPlanTime"
  echo "### test_cuda_kda_bwd_chunked (chunked14 forced by the tests; filter $k14_f)" >>"$OUT/ab-tests.txt"
  timeout "$(cap $(( $(k14_left) - 2 )))" stdbuf -oL -eL "$BIN/test_cuda_kda_bwd_chunked" --gtest_brief=1 \
    --gtest_filter="$k14_f" >>"$OUT/ab-tests.txt" 2>&1
  k14_rc=$?
  if [ $k14_rc -eq 0 ]; then say "PASS test_cuda_kda_bwd_chunked (chunked14 cases)"
  elif [ $k14_rc -eq 124 ]; then say "CUT test_cuda_kda_bwd_chunked (chunked14 cases) at the piece's cap: see ab-tests.txt"
  else status=1; say "FAIL test_cuda_kda_bwd_chunked (chunked14 cases; exit $k14_rc)"; fi
  grep -h '^\[kdabwd14\]' "$OUT/ab-tests.txt" | head -24 | while read -r l; do say "kdabwd14: $l"; done
else
  say "kdabwd14 chunked14 tests skipped (no time)"
fi
true

# KDA backward chunk kernel chunked11 (LINATTN_CUDA_KDA_BWD=chunked11; opt-in, kda/kda_bwd_chunk11.cu = SPLIT of
# kda_bwd_chunk2_kernel.cuh, pieces in kda_bwd_chunk11_parts.cuh; perf-notes "chunked11"): chunked7 with each
# diagonal 16 x 16 intra block split into two 8 x 8 triangles walked in lockstep (8 warp steps instead of 16) and
# the lower-left 8 x 8 square on 3xTF32 mma (separable through row 16 I + 7: products of decays <= 1 only; the
# column walk as a Horner recurrence). Not bitwise chunked7; compiled here (stack 160 -> 144 B, 128 registers),
# never run on a GPU before this piece.
# Prediction: chunk kernel ~6.9 -> ~6.45 ms, KDA 32/32 1x32768 fwd+bwd graph with the cache 10.25 -> ~9.8 ms.
# This piece (its own clock, 90 s; every step guarded):
# 1. bench default vs chunked11, bench-cuda-bwd KDA 32/32 1x32768 --saved 1, two rounds interleaved (the deciding
#    rows first: a failing kernel still shows up in the tests below);
# 2. test_cuda_kda_bwd_chunked's *Chunked11* tests (fp64 reference + against chunked7 in every case of bf16 BT 64
#    and fp16 BT 32, the -1000 / -5 gates at BT 64 / 32, one graph case) and the mode test.
# Flip rule: tests pass and chunked11 faster in both rounds -> gdn_bwd.cc route: `== "chunked11"` ->
# `!= "chunked7"` (chunked7 stays selectable).
KDG=LINATTN_CUDA_KDA_BWD
kdg_t0=$(date +%s)
kdg_left() { local a=$(( 90 - ($(date +%s) - kdg_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
kdg_b() {  # kdg_b SWITCH
  local l; l=$(kdg_left)
  [ "$l" -gt 36 ] || { say "kdadiag bench $1 skipped (piece time spent)"; return; }
  bench $(( l < 46 ? l - 30 : 16 )) "$1" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1 \
    --commit "$COMMIT"
}
kdg_b none; kdg_b $KDG=chunked11; kdg_b $KDG=chunked11; kdg_b none
if [ "$(kdg_left)" -gt 10 ]; then
  kdg_f='*Chunked11MatchesReferenceAndChunked7/bf16_bt64:*Chunked11MatchesReferenceAndChunked7/fp16_bt32'
  kdg_f="$kdg_f:*Chunked11AllGatesAtTheLimits:*Chunked11ReplayEqualsEagerFixed:*RemovedModeIsRejectedAtPlanTime"
  echo "### test_cuda_kda_bwd_chunked (chunked11 forced by the tests; filter $kdg_f)" >>"$OUT/ab-tests.txt"
  timeout "$(cap $(( $(kdg_left) - 2 )))" stdbuf -oL -eL "$BIN/test_cuda_kda_bwd_chunked" --gtest_brief=1 \
    --gtest_filter="$kdg_f" >>"$OUT/ab-tests.txt" 2>&1
  kdg_rc=$?
  if [ $kdg_rc -eq 0 ]; then say "PASS test_cuda_kda_bwd_chunked (chunked11 cases)"
  elif [ $kdg_rc -eq 124 ]; then say "CUT test_cuda_kda_bwd_chunked (chunked11 cases) at the piece's cap: see ab-tests.txt"
  else status=1; say "FAIL test_cuda_kda_bwd_chunked (chunked11 cases; exit $kdg_rc)"; fi
else
  say "kdadiag chunked11 tests skipped (no time)"
fi
true

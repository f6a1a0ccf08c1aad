# KDA backward chunk kernel chunked18 (LINATTN_CUDA_KDA_BWD=chunked18; opt-in, kda/kda_bwd_chunk18.cu = SPLIT + GC12 +
# C13 + C14 + C15 + C17 + C18 of kda_bwd_chunk2_kernel.cuh, pieces in kda_bwd_chunk18_parts.cuh; perf-notes "chunked18"):
# chunked17 with each diagonal 8 x 8 triangle split into two walked 4 x 4 triangles + one 4 x 4 square on 3xTF32
# mma.sync (the walks <= 4 steps per lane instead of <= 8). Not bitwise chunked17 (other order of the sums). Compiled
# here, never run on a GPU. Prediction: chunk kernel -3 to -6% (5.37 -> ~5.05-5.2 ms), backward 32/32 1x32768
# --saved 1 6.77 -> ~6.45-6.6 ms.
# This piece (its own clock, 120 s; every step guarded):
# 1. bench default vs chunked18, bench-cuda-bwd KDA 32/32 1x32768 --iters 5 --saved 1: none / chunked18 / chunked18 /
#    none;
# 2. test_cuda_kda_bwd_chunked's *Chunked18* tests (every case of bf16 / fp16 x BT 64 / 32 against the fp64 reference
#    and chunked17's bars, a '[kdabwd18] ... rel_rms vs fp64: chunked17 ... | chunked18 ...' line per case; -1000 / -5
#    gates at BT 64 / 32; graph replay == eager fixed) + the mode test.
# Flip rule: tests pass, chunked18's rel RMS within ~2x of chunked17's on every [kdabwd18] line, chunked18 faster in
# both rounds -> gdn_bwd.cc route: chunked18's kernel for the default (chunked17 kept selectable).
K18=LINATTN_CUDA_KDA_BWD
k18_t0=$(date +%s)
k18_left() { local a=$(( 120 - ($(date +%s) - k18_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
k18_b() {  # k18_b SWITCH
  local l; l=$(k18_left)
  [ "$l" -gt 60 ] || { say "kdabwd18 bench $1 skipped (piece time spent)"; return; }
  bench $(( l < 70 ? l - 50 : 18 )) "$1" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1 \
    --commit "$COMMIT"
}
k18_b none; k18_b $K18=chunked18; k18_b $K18=chunked18; k18_b none
if [ "$(k18_left)" -gt 10 ]; then
  k18_f='*Chunked18MatchesReferenceAndChunked17/bf16_bt64:*Chunked18MatchesReferenceAndChunked17/fp16_bt32'
  k18_f="$k18_f:*Chunked18AllGatesAtTheLimits:*Chunked18ReplayEqualsEagerFixed:*RemovedModeIsRejectedAtPlanTime"
  k18_f="$k18_f:*Chunked18MatchesReferenceAndChunked17/bf16_bt32:*Chunked18MatchesReferenceAndChunked17/fp16_bt64"
  echo "### test_cuda_kda_bwd_chunked (chunked18 forced by the tests; filter $k18_f)" >>"$OUT/ab-tests.txt"
  timeout "$(cap $(( $(k18_left) - 2 )))" stdbuf -oL -eL "$BIN/test_cuda_kda_bwd_chunked" --gtest_brief=1 \
    --gtest_filter="$k18_f" >>"$OUT/ab-tests.txt" 2>&1
  k18_rc=$?
  if [ $k18_rc -eq 0 ]; then say "PASS test_cuda_kda_bwd_chunked (chunked18 cases)"
  elif [ $k18_rc -eq 124 ]; then say "CUT test_cuda_kda_bwd_chunked (chunked18 cases) at the piece's cap: see ab-tests.txt"
  else status=1; say "FAIL test_cuda_kda_bwd_chunked (chunked18 cases; exit $k18_rc)"; fi
  grep -h '^\[kdabwd18\]' "$OUT/ab-tests.txt" | head -12 | while read -r l; do say "kdabwd18: $l"; done
else
  say "kdabwd18 chunked18 tests skipped (no time)"
fi
true

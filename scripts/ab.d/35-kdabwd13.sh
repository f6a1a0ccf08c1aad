# KDA backward chunk kernel chunked13 (LINATTN_CUDA_KDA_BWD=chunked13; opt-in, kda/kda_bwd_chunk13.cu = SPLIT + GC12 +
# C13 of kda_bwd_chunk2_kernel.cuh, pieces in kda_bwd_chunk13_parts.cuh; perf-notes "chunked13"): chunked12 with
# (1) a head's fp32 raw gates as one cp.async tile into `a`, committed between q / k and the head's 152 KB of tiles,
# and the staging's formula pass run while those tiles stream (chunked12: 16 scalar gate loads per thread issued
# behind the tiles' cp.asyncs, the STS waiting on them chunked7's hottest instruction, 3.2% of the samples);
# 16-bit / unaligned gates keep chunked12's loads; (2) the split-TF32 hi parts of the off-diagonal / square blocks by
# cvt.rna's finite-input arithmetic without its non-finite test (2 of ~7 instructions per split, ~150 splits per
# warp and head). The same values: expected bitwise chunked12 (the tests assert it). Compiled here (128 registers,
# spill st/ld 228/216 -> 252/232 B, all at phase boundaries; SASS 6792 -> 6712 at bf16 BT 64 V 128), never run on
# a GPU before this piece. Prediction: chunk kernel -3 to -6%, backward 32/32 1x32768 --saved 1 8.02 -> ~7.7-7.85 ms.
# This piece (its own clock, 90 s; every step guarded):
# 1. bench default vs chunked13, bench-cuda-bwd KDA 32/32 1x32768 --saved 1, two rounds interleaved;
# 2. test_cuda_kda_bwd_chunked's *Chunked13* tests (every case of bf16 BT 64 and fp16 BT 32 bitwise against
#    chunked12 and close to the fp64 reference, '[kdabwd13] ... ==|!=' lines; -1000 / -5 gates; graph) + the mode test.
# Flip rule: tests pass ('==' everywhere) and chunked13 faster in both rounds -> gdn_bwd.cc route: chunked13's
# kernel for the default (chunked12 kept selectable).
K13=LINATTN_CUDA_KDA_BWD
k13_t0=$(date +%s)
k13_left() { local a=$(( 90 - ($(date +%s) - k13_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
k13_b() {  # k13_b SWITCH
  local l; l=$(k13_left)
  [ "$l" -gt 36 ] || { say "kdabwd13 bench $1 skipped (piece time spent)"; return; }
  bench $(( l < 46 ? l - 30 : 16 )) "$1" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1 \
    --commit "$COMMIT"
}
k13_b none; k13_b $K13=chunked13; k13_b $K13=chunked13; k13_b none
if [ "$(k13_left)" -gt 10 ]; then
  k13_f='*Chunked13MatchesReferenceAndChunked12/bf16_bt64:*Chunked13MatchesReferenceAndChunked12/fp16_bt32'
  k13_f="$k13_f:*Chunked13AllGatesAtTheLimits:*Chunked13ReplayEqualsEagerFixed:*RemovedModeIsRejectedAtPlanTime"
  echo "### test_cuda_kda_bwd_chunked (chunked13 forced by the tests; filter $k13_f)" >>"$OUT/ab-tests.txt"
  timeout "$(cap $(( $(k13_left) - 2 )))" stdbuf -oL -eL "$BIN/test_cuda_kda_bwd_chunked" --gtest_brief=1 \
    --gtest_filter="$k13_f" >>"$OUT/ab-tests.txt" 2>&1
  k13_rc=$?
  if [ $k13_rc -eq 0 ]; then say "PASS test_cuda_kda_bwd_chunked (chunked13 cases)"
  elif [ $k13_rc -eq 124 ]; then say "CUT test_cuda_kda_bwd_chunked (chunked13 cases) at the piece's cap: see ab-tests.txt"
  else status=1; say "FAIL test_cuda_kda_bwd_chunked (chunked13 cases; exit $k13_rc)"; fi
  grep -h '^\[kdabwd13\]' "$OUT/ab-tests.txt" | sort | uniq -c | head -20 | while read -r l; do say "kdabwd13: $l"; done
else
  say "kdabwd13 chunked13 tests skipped (no time)"
fi
true

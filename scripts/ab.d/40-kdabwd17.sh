# KDA backward chunk kernel chunked17 (LINATTN_CUDA_KDA_BWD=chunked17; opt-in, kda/kda_bwd_chunk17.cu = SPLIT + GC12 +
# C13 + C14 + C15 + C17 of kda_bwd_chunk2_kernel.cuh, pieces in kda_bwd_chunk17_parts.cuh; perf-notes "chunked17"):
# chunked15 with the row scales batched (8 rows per warp at once instead of a dependent chain per row), bf16 pairs of
# the diagonal walks / row dots unpacked by shift + mask (one instruction less per pair), eg / egl steps with selects
# instead of divergent branches. The same values: bitwise chunked15 (the tests assert it). Compiled here, never run
# on a GPU. Prediction: chunk kernel -3 to -6% (5.51 -> ~5.2-5.35 ms), backward 32/32 1x32768 --saved 1 7.06 ->
# ~6.85-6.95 ms.
# This piece (its own clock, 90 s; every step guarded):
# 1. bench default vs chunked17, bench-cuda-bwd KDA 32/32 1x32768 --iters 5 --saved 1: none / chunked17 / chunked17 /
#    none;
# 2. test_cuda_kda_bwd_chunked's *Chunked17* tests (every case of bf16 BT 64 and fp16 BT 32 against the reference and
#    bitwise chunked15, '[kdabwd17] ... ==|!= chunked15 bitwise' lines; -1000 / -5 gates at BT 64 / 32; graph replay ==
#    eager fixed) + the mode test.
# Flip rule: tests pass, '==' on every [kdabwd17] line, chunked17 faster in both rounds -> gdn_bwd.cc route: chunked17's
# kernel for the default (chunked15 kept selectable).
K17=LINATTN_CUDA_KDA_BWD
k17_t0=$(date +%s)
k17_left() { local a=$(( 90 - ($(date +%s) - k17_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
k17_b() {  # k17_b SWITCH
  local l; l=$(k17_left)
  [ "$l" -gt 36 ] || { say "kdabwd17 bench $1 skipped (piece time spent)"; return; }
  bench $(( l < 46 ? l - 30 : 16 )) "$1" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1 \
    --commit "$COMMIT"
}
k17_b none; k17_b $K17=chunked17; k17_b $K17=chunked17; k17_b none
if [ "$(k17_left)" -gt 10 ]; then
  k17_f='*Chunked17MatchesReferenceAndChunked15/bf16_bt64:*Chunked17MatchesReferenceAndChunked15/fp16_bt32'
  k17_f="$k17_f:*Chunked17AllGatesAtTheLimits:*Chunked17ReplayEqualsEagerFixed:*RemovedModeIsRejectedAtPlanTime"
  echo "### test_cuda_kda_bwd_chunked (chunked17 forced by the tests; filter $k17_f)" >>"$OUT/ab-tests.txt"
  timeout "$(cap $(( $(k17_left) - 2 )))" stdbuf -oL -eL "$BIN/test_cuda_kda_bwd_chunked" --gtest_brief=1 \
    --gtest_filter="$k17_f" >>"$OUT/ab-tests.txt" 2>&1
  k17_rc=$?
  if [ $k17_rc -eq 0 ]; then say "PASS test_cuda_kda_bwd_chunked (chunked17 cases)"
  elif [ $k17_rc -eq 124 ]; then say "CUT test_cuda_kda_bwd_chunked (chunked17 cases) at the piece's cap: see ab-tests.txt"
  else status=1; say "FAIL test_cuda_kda_bwd_chunked (chunked17 cases; exit $k17_rc)"; fi
  grep -h '^\[kdabwd17\]' "$OUT/ab-tests.txt" | grep -c '!=' | while read -r n; do say "kdabwd17: $n case(s) != chunked15"; done
  grep -h '^\[kdabwd17\]' "$OUT/ab-tests.txt" | grep 'bitwise' | head -12 | while read -r l; do say "kdabwd17: $l"; done
else
  say "kdabwd17 chunked17 tests skipped (no time)"
fi
true

# KDA backward chunk kernel chunked15 (LINATTN_CUDA_KDA_BWD=chunked15; opt-in, kda/kda_bwd_chunk15.cu = SPLIT + GC12 +
# C13 + C14 + C15 of kda_bwd_chunk2_kernel.cuh, pieces in kda_bwd_chunk15_parts.cuh; perf-notes "chunked15"): chunked14
# with the head's row scalars loaded ahead of its tiles instead of behind them (gdnbwd11's lesson on the KDA kernel):
# beta, dt_bias / A_log and the Y.v rows of v as one cp.async group with the gate tile, issued before q / k (head 0)
# or the head's tiles; the dbeta draw formed with beta at the head start (no round trip in the chain's tail). The same
# values: bitwise chunked14 (the tests assert it). Compiled here, never run on a GPU.
# Prediction: chunk kernel -3 to -8%, backward 32/32 1x32768 --saved 1 7.70 -> ~7.3-7.55 ms, fwd+bwd graph 9.55 ->
# ~9.15-9.4 ms.
# This piece (its own clock, 90 s; every step guarded):
# 1. bench default vs chunked15, bench-cuda-bwd KDA 32/32 1x32768 --iters 5 --saved 1, two rounds interleaved;
# 2. test_cuda_kda_bwd_chunked's *Chunked15* tests (every case of bf16 BT 64 and fp16 BT 32 against the reference and
#    bitwise chunked14, '[kdabwd15] ... ==|!= chunked14 bitwise' lines; -1000 / -5 gates at BT 64 / 32; graph replay ==
#    eager fixed) + the mode test.
# Flip rule: tests pass, '==' on every [kdabwd15] line, chunked15 faster in both rounds -> gdn_bwd.cc route: chunked15's
# kernel for the default (chunked14 kept selectable).
K15=LINATTN_CUDA_KDA_BWD
k15_t0=$(date +%s)
k15_left() { local a=$(( 90 - ($(date +%s) - k15_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
k15_b() {  # k15_b SWITCH
  local l; l=$(k15_left)
  [ "$l" -gt 36 ] || { say "kdabwd15 bench $1 skipped (piece time spent)"; return; }
  bench $(( l < 46 ? l - 30 : 16 )) "$1" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1 \
    --commit "$COMMIT"
}
k15_b none; k15_b $K15=chunked15; k15_b $K15=chunked15; k15_b none
if [ "$(k15_left)" -gt 10 ]; then
  k15_f='*Chunked15MatchesReferenceAndChunked14/bf16_bt64:*Chunked15MatchesReferenceAndChunked14/fp16_bt32'
  k15_f="$k15_f:*Chunked15AllGatesAtTheLimits:*Chunked15ReplayEqualsEagerFixed:*RemovedModeIsRejectedAtPlanTime"
  echo "### test_cuda_kda_bwd_chunked (chunked15 forced by the tests; filter $k15_f)" >>"$OUT/ab-tests.txt"
  timeout "$(cap $(( $(k15_left) - 2 )))" stdbuf -oL -eL "$BIN/test_cuda_kda_bwd_chunked" --gtest_brief=1 \
    --gtest_filter="$k15_f" >>"$OUT/ab-tests.txt" 2>&1
  k15_rc=$?
  if [ $k15_rc -eq 0 ]; then say "PASS test_cuda_kda_bwd_chunked (chunked15 cases)"
  elif [ $k15_rc -eq 124 ]; then say "CUT test_cuda_kda_bwd_chunked (chunked15 cases) at the piece's cap: see ab-tests.txt"
  else status=1; say "FAIL test_cuda_kda_bwd_chunked (chunked15 cases; exit $k15_rc)"; fi
  grep -h '^\[kdabwd15\]' "$OUT/ab-tests.txt" | grep -c '!=' | while read -r n; do say "kdabwd15: $n case(s) != chunked14"; done
  grep -h '^\[kdabwd15\]' "$OUT/ab-tests.txt" | grep 'bitwise' | head -12 | while read -r l; do say "kdabwd15: $l"; done
else
  say "kdabwd15 chunked15 tests skipped (no time)"
fi
true

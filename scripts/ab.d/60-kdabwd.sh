# KDA backward chunk kernel chunked5 (LINATTN_CUDA_KDA_BWD=chunked5; kda/kda_bwd_chunk5.cu, MODE 5 of
# kda_bwd_chunk2_kernel.cuh; perf-notes "chunked5"): chunked4's arithmetic in ~56% of its code
# (bf16 BT 64 V 128: 7280 vs 12952 SASS instructions), against chunked4's instruction-fetch stalls.
# Not yet run on a GPU. This piece (own cap ~60 s of device time)
# 1. test_cuda_kda_bwd_chunked bf16 BT 64 + extreme gates (the binary runs every variant itself, so the
#    tests step covers chunked5 in all its tests; its "[kdabwd7]" lines say whether chunked5 == chunked4
#    bitwise);
# 2. memcheck of IsDeterministic/bf16_bt64 (sanitized: chunked, chunked3, chunked4, chunked5);
# 3. benches default (chunked4) vs chunked5, interleaved, KDA 32/32 1x32768 (twice) then 4096x8;
# 4. if time is left: the KDA graph backward tests with chunked5 as the route (env read per call), and
#    racecheck of step 2's case (shared-memory reuse: raw gates over vh..ai, dq / dk staging over a and
#    the union).
# Flip rule: chunked5 faster at 1x32768 and every test passing -> gdn_bwd.cc routes the default to
# launch_kda_bwd_chunk5 (the `else launch_kda_bwd_chunk4(p, w, st);` line).
KB=LINATTN_CUDA_KDA_BWD
kb_t0=$(date +%s)
kb_left() { local a=$(( 60 - ($(date +%s) - kb_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
kb_san() {  # kb_san TOOL: compute-sanitizer TOOL on IsDeterministic/bf16_bt64 within this piece's time
  [ "$(kb_left)" -gt 15 ] || { say "kdabwd $1 skipped (no time)"; return; }
  echo "### $1 test_cuda_kda_bwd_chunked IsDeterministic/bf16_bt64 (chunked5 among the variants)" >>"$OUT/ab-tests.txt"
  LINATTN_SANITIZED=1 timeout "$(cap "$(( $(kb_left) - 3 ))")" compute-sanitizer --tool "$1" --error-exitcode 99 \
    "$BIN/test_cuda_kda_bwd_chunked" --gtest_filter='*IsDeterministic/bf16_bt64' >>"$OUT/ab-tests.txt" 2>&1
  kb_rc=$?
  [ $kb_rc -eq 0 ] || [ $kb_rc -eq 124 ] || status=1
  say "kdabwd $1: exit $kb_rc ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
}
ab_test $KB=chunked5 test_cuda_kda_bwd_chunked '*MatchesReferenceAndTokenPath/bf16_bt64:*Extreme*'
grep '\[kdabwd7\]' "$OUT/ab-tests.txt" | sort | uniq -c | tee -a "$LOG"
kb_san memcheck
for sw in none $KB=chunked5 none $KB=chunked5; do
  [ "$(kb_left)" -gt 8 ] || { say "kdabwd bench $sw 1x32768 skipped (no time)"; continue; }
  bench 10 "$sw" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 10 --commit "$COMMIT"
done
for sw in none $KB=chunked5; do
  [ "$(kb_left)" -gt 8 ] || { say "kdabwd bench $sw 4096x8 skipped (no time)"; continue; }
  bench 10 "$sw" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 4096x8 --iters 10 --commit "$COMMIT"
done
if [ "$(kb_left)" -gt 25 ]; then
  ab_test $KB=chunked5 test_cuda_graph_bwd 'CudaGraphKdaFwdBwd.*'
fi
kb_san racecheck

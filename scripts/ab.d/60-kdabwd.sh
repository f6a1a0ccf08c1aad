# KDA backward chunk kernels chunked5 / chunked6 (LINATTN_CUDA_KDA_BWD=chunked5 | chunked6; opt-in,
# kda/kda_bwd_chunk5.cu = MODE 5 / 6 of kda_bwd_chunk2_kernel.cuh; perf-notes "chunked5 / chunked6"):
# chunked5 = chunked4's arithmetic in 42% of its code (bf16 BT 64 V 128: 5456 vs 12952 SASS
# instructions) against chunked4's instruction-fetch stalls; chunked6 = chunked5 with the split-TF32
# operands by truncation (fewer ALU instructions, not bitwise). Not yet run on a GPU. This piece (its
# own cap: ~60 s of device time)
# 1. test_cuda_kda_bwd_chunked bf16 BT 64 + extreme gates (the binary runs every variant itself, so the
#    tests step covers both in all its tests; its "[kdabwd7]" lines say whether chunked5 == chunked4
#    bitwise);
# 2. bench default (chunked4) vs chunked5 vs chunked6, KDA 32/32 1x32768;
# 3. memcheck of IsDeterministic/bf16_bt64 (sanitized: chunked, chunked3, chunked4, chunked5);
# 4. the same bench again (interleaved rounds), then 4096x8;
# 5. if time is left: the KDA graph backward tests with chunked5 as the route (env read per call), and
#    racecheck of step 3's case (shared-memory reuse: raw gates over vh..ai, dq / dk staging over a and
#    the union).
# Flip rule: every test passing and the variant faster at 1x32768 in both rounds -> gdn_bwd.cc routes
# the default to it (the `else launch_kda_bwd_chunk4(p, w, st);` line -> `launch_kda_bwd_chunk5(p, w,
# false, st)` for chunked5, `true` for chunked6).
KB=LINATTN_CUDA_KDA_BWD
kb_t0=$(date +%s)
kb_left() { local a=$(( 60 - ($(date +%s) - kb_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
kb_bench() {  # kb_bench LENGTHS SWITCH...: one bench row set per switch, within this piece's time
  local len=$1 sw
  shift
  for sw in "$@"; do
    [ "$(kb_left)" -gt 8 ] || { say "kdabwd bench $sw $len skipped (no time)"; continue; }
    bench 10 "$sw" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths "$len" --iters 10 --commit "$COMMIT"
  done
}
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
kb_bench 1x32768 none $KB=chunked5 $KB=chunked6
kb_san memcheck
kb_bench 1x32768 none $KB=chunked5 $KB=chunked6
kb_bench 4096x8 none $KB=chunked5 $KB=chunked6
if [ "$(kb_left)" -gt 25 ]; then
  ab_test $KB=chunked5 test_cuda_graph_bwd 'CudaGraphKdaFwdBwd.*'
fi
kb_san racecheck

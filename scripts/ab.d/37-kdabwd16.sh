# KDA backward chunk kernel chunked16 (LINATTN_CUDA_KDA_BWD=chunked16; opt-in, kda/kda_bwd_chunk16.cu = SPLIT + GC12 +
# C13 + C14 + C15 + C16 of kda_bwd_chunk2_kernel.cuh, pieces in kda_bwd_chunk16_parts.cuh; perf-notes "chunked16"):
# chunked15 with (1) the head's S / dS (64 KB) prefetched into L2 before chunk_span's two dependent index loads (next
# head's at each head start for G > 1), (2) at V = 128 with fp32 aligned gates, the gate chain's raw gates as a cp.async
# group after the daqk / dL barrier into dead tiles (vh / vt), read from shared memory instead of 16 global loads per
# thread after the chain's start (16-bit gates: the same loads at that point, into the same rows), (3) the row-scale
# pass's lane test from %laneid (no spilled-lane LDL behind the cp.async stream after the q / k barrier). The same
# values: bitwise chunked15 (the tests assert it). Compiled here, never run on a GPU.
# Prediction: chunk kernel -1.5 to -4%, backward 32/32 1x32768 --saved 1 7.11 -> ~6.9-7.05 ms, fwd+bwd graph 8.98 ->
# ~8.8-8.93 ms. Risk: more spills at phase boundaries (bf16 BT 64 V 128 stack 144 -> 160 B).
# This piece (its own clock, 90 s; every step guarded):
# 1. bench default vs chunked16, bench-cuda-bwd KDA 32/32 1x32768 --iters 5 --saved 1, two rounds interleaved;
# 2. test_cuda_kda_bwd_chunked's *Chunked16* tests (every case of bf16 BT 64 and fp16 BT 32 against the reference and
#    bitwise chunked15, '[kdabwd16] ... ==|!= chunked15 bitwise' lines; -1000 / -5 gates at BT 64 / 32; graph replay ==
#    eager fixed) + the mode test.
# Flip rule: tests pass, '==' on every [kdabwd16] line, chunked16 faster in both rounds -> gdn_bwd.cc route: chunked16's
# kernel for the default (chunked15 kept selectable).
K16=LINATTN_CUDA_KDA_BWD
k16_t0=$(date +%s)
k16_left() { local a=$(( 90 - ($(date +%s) - k16_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
k16_b() {  # k16_b SWITCH
  local l; l=$(k16_left)
  [ "$l" -gt 36 ] || { say "kdabwd16 bench $1 skipped (piece time spent)"; return; }
  bench $(( l < 46 ? l - 30 : 16 )) "$1" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1 \
    --commit "$COMMIT"
}
k16_b none; k16_b $K16=chunked16; k16_b $K16=chunked16; k16_b none
if [ "$(k16_left)" -gt 10 ]; then
  k16_f='*Chunked16MatchesReferenceAndChunked15/bf16_bt64:*Chunked16MatchesReferenceAndChunked15/fp16_bt32'
  k16_f="$k16_f:*Chunked16AllGatesAtTheLimits:*Chunked16ReplayEqualsEagerFixed:*RemovedModeIsRejectedAtPlanTime"
  echo "### test_cuda_kda_bwd_chunked (chunked16 forced by the tests; filter $k16_f)" >>"$OUT/ab-tests.txt"
  timeout "$(cap $(( $(k16_left) - 2 )))" stdbuf -oL -eL "$BIN/test_cuda_kda_bwd_chunked" --gtest_brief=1 \
    --gtest_filter="$k16_f" >>"$OUT/ab-tests.txt" 2>&1
  k16_rc=$?
  if [ $k16_rc -eq 0 ]; then say "PASS test_cuda_kda_bwd_chunked (chunked16 cases)"
  elif [ $k16_rc -eq 124 ]; then say "CUT test_cuda_kda_bwd_chunked (chunked16 cases) at the piece's cap: see ab-tests.txt"
  else status=1; say "FAIL test_cuda_kda_bwd_chunked (chunked16 cases; exit $k16_rc)"; fi
  grep -h '^\[kdabwd16\]' "$OUT/ab-tests.txt" | grep -c '!=' | while read -r n; do say "kdabwd16: $n case(s) != chunked15"; done
  grep -h '^\[kdabwd16\]' "$OUT/ab-tests.txt" | grep 'bitwise' | head -12 | while read -r l; do say "kdabwd16: $l"; done
else
  say "kdabwd16 chunked16 tests skipped (no time)"
fi
true

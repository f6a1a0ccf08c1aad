# KDA backward chunk kernel chunked12 (LINATTN_CUDA_KDA_BWD=chunked12; opt-in, kda/kda_bwd_chunk12.cu = SPLIT + GC12
# of kda_bwd_chunk2_kernel.cuh, pieces in kda_bwd_chunk12_parts.cuh; perf-notes "chunked12"): chunked11 with the
# per-channel gate work (decay staging + reverse-cumsum gate chain) dispatched once per gate form instead of per
# element, its exponentials issued per block of rows with the divisions on nvcc's fast path without branch / call
# (rcp_fast), the gate constants loaded before the chain's barrier and dg stored in 8-channel pieces (16-byte
# stores) instead of one dtype-switched scalar store per element. The same expressions in the same order: expected
# bitwise chunked11 (the tests assert it). Compiled here (128 registers, stack 144 -> 128 B, spill st/ld 244/240 ->
# 228/216 B at bf16 BT 64 V 128), never run on a GPU before this piece.
# Prediction: KDA backward 32/32 1x32768 --saved 1 8.34 -> ~8.1 ms (-150 to -300 us; fwd+bwd graph 10.20 -> ~9.95).
# This piece (its own clock, 90 s; every step guarded):
# 1. bench default vs chunked12, bench-cuda-bwd KDA 32/32 1x32768 --saved 1, two rounds interleaved;
# 2. test_cuda_kda_bwd_chunked's *Chunked12* tests (every case of bf16 BT 64 and fp16 BT 32 bitwise against
#    chunked11 and close to the fp64 reference, '[kdagate] ... ==|!=' lines; -1000 / -5 gates; graph) + the mode test.
# Flip rule: tests pass ('==' everywhere) and chunked12 faster in both rounds -> gdn_bwd.cc route: chunked12's
# kernel for the default (chunked11 kept selectable).
KGT=LINATTN_CUDA_KDA_BWD
kgt_t0=$(date +%s)
kgt_left() { local a=$(( 90 - ($(date +%s) - kgt_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
kgt_b() {  # kgt_b SWITCH
  local l; l=$(kgt_left)
  [ "$l" -gt 36 ] || { say "kdagate bench $1 skipped (piece time spent)"; return; }
  bench $(( l < 46 ? l - 30 : 16 )) "$1" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1 \
    --commit "$COMMIT"
}
kgt_b none; kgt_b $KGT=chunked12; kgt_b $KGT=chunked12; kgt_b none
if [ "$(kgt_left)" -gt 10 ]; then
  kgt_f='*Chunked12MatchesReferenceAndChunked11/bf16_bt64:*Chunked12MatchesReferenceAndChunked11/fp16_bt32'
  kgt_f="$kgt_f:*Chunked12AllGatesAtTheLimits:*Chunked12ReplayEqualsEagerFixed:*RemovedModeIsRejectedAtPlanTime"
  echo "### test_cuda_kda_bwd_chunked (chunked12 forced by the tests; filter $kgt_f)" >>"$OUT/ab-tests.txt"
  timeout "$(cap $(( $(kgt_left) - 2 )))" stdbuf -oL -eL "$BIN/test_cuda_kda_bwd_chunked" --gtest_brief=1 \
    --gtest_filter="$kgt_f" >>"$OUT/ab-tests.txt" 2>&1
  kgt_rc=$?
  if [ $kgt_rc -eq 0 ]; then say "PASS test_cuda_kda_bwd_chunked (chunked12 cases)"
  elif [ $kgt_rc -eq 124 ]; then say "CUT test_cuda_kda_bwd_chunked (chunked12 cases) at the piece's cap: see ab-tests.txt"
  else status=1; say "FAIL test_cuda_kda_bwd_chunked (chunked12 cases; exit $kgt_rc)"; fi
  grep -h '^\[kdagate\]' "$OUT/ab-tests.txt" | sort | uniq -c | head -20 | while read -r l; do say "kdagate: $l"; done
else
  say "kdagate chunked12 tests skipped (no time)"
fi
true

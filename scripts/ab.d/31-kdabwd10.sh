# KDA backward chunk kernel chunked10 (LINATTN_CUDA_KDA_BWD=chunked10; opt-in, kda/kda_bwd_chunk5.cu = MODE 10 of
# kda_bwd_chunk2_kernel.cuh, pieces in kda_bwd_chunk10_parts.cuh; perf-notes "chunked10"): the default chunked7
# with the diagonal 16 x 16 blocks' per-element walks balanced over the warp's lanes (17 single-row steps per
# lane instead of 16 two-row steps) and the two gate-formula loops unrolled by 2. Meant to be bitwise equal to
# chunked7. Not yet run on a GPU.
# This piece (its own clock: 90 s of device time, every step guarded):
# 1. test_cuda_kda_bwd_chunked (the binary runs chunked10 itself in every case of MatchesReferenceAndTokenPath,
#    IsDeterministic, the extreme gates (-1000 / -5, BT 64 / 32) and one graph case; "[kdabwd10]" lines:
#    chunked10 ==|!= chunked7 bitwise, expected ==);
# 2. bench KDA 32/32, default vs chunked10 interleaved: 1x32768 without / with --saved 1, 512x16, then the second
#    round of 1x32768 in reverse order (each row guarded by the piece's clock);
# 3. test_cuda_graph_bwd's KDA cases with the switch exported (the default route takes it) if time is left.
# Flip rule: every test passing and chunked10 faster at 1x32768 in both rounds -> gdn_bwd.cc, the route's
# `env_or(...) == "chunked10"` -> `!= "chunked7"` (chunked7 stays selectable).
K10=LINATTN_CUDA_KDA_BWD
k10_t0=$(date +%s)
k10_left() { local a=$(( 90 - ($(date +%s) - k10_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
if [ "$(k10_left)" -gt 45 ]; then
  k10_f='*MatchesReferenceAndTokenPath/bf16_bt64:*MatchesReferenceAndTokenPath/fp16_bt32:*IsDeterministic/bf16_bt64'
  k10_f="$k10_f:CudaKdaBwdChunkedExtreme.*:CudaKdaBwdChunkedApi.RemovedModeIsRejectedAtPlanTime"
  echo "### test_cuda_kda_bwd_chunked (chunked10 in every case; filter $k10_f)" >>"$OUT/ab-tests.txt"
  timeout "$(cap 25)" stdbuf -oL -eL "$BIN/test_cuda_kda_bwd_chunked" --gtest_brief=1 --gtest_filter="$k10_f" \
    >>"$OUT/ab-tests.txt" 2>&1
  k10_rc=$?
  if [ $k10_rc -eq 0 ]; then say "PASS test_cuda_kda_bwd_chunked (chunked10 in every case)"
  elif [ $k10_rc -eq 124 ]; then say "CUT test_cuda_kda_bwd_chunked (chunked10) at its 25 s cap: see ab-tests.txt"
  else status=1; say "FAIL test_cuda_kda_bwd_chunked (chunked10 in every case; exit $k10_rc)"; fi
  grep '\[kdabwd10\]' "$OUT/ab-tests.txt" | awk '{print $5, $6, $7, $8}' | sort | uniq -c | tee -a "$LOG"
else
  say "kdabwd10 chunked10 tests skipped (no time)"
fi
# bench rows: round 1 (both cache settings, then 512x16), round 2 reversed, so a short share still has one of each
k10_b() {  # k10_b SWITCH LENGTHS SAVED
  local l; l=$(k10_left)
  [ "$l" -gt 8 ] || { say "kdabwd10 bench $1 $2 saved $3 skipped (piece time spent)"; return; }
  bench $(( l < 25 ? l : 25 )) "$1" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths "$2" --saved "$3" --iters 5 \
    --commit "$COMMIT"
}
k10_b none 1x32768 0; k10_b $K10=chunked10 1x32768 0; k10_b none 1x32768 1; k10_b $K10=chunked10 1x32768 1
k10_b none 512x16 0; k10_b $K10=chunked10 512x16 0
k10_b $K10=chunked10 1x32768 1; k10_b none 1x32768 1; k10_b $K10=chunked10 1x32768 0; k10_b none 1x32768 0
if [ "$(k10_left)" -gt 14 ]; then  # the public graph path routed by the exported switch (lowest priority)
  echo "### test_cuda_graph_bwd with $K10=chunked10 (KDA cases, training cache)" >>"$OUT/ab-tests.txt"
  env $K10=chunked10 timeout "$(cap $(( $(k10_left) - 2 )))" stdbuf -oL -eL "$BIN/test_cuda_graph_bwd" --gtest_brief=1 \
    --gtest_filter='CudaGraphKdaFwdBwd.*:CudaGraphFwdBwd.TrainingCache*' >>"$OUT/ab-tests.txt" 2>&1
  k10_rc=$?
  if [ $k10_rc -eq 0 ]; then say "PASS test_cuda_graph_bwd with $K10=chunked10"
  elif [ $k10_rc -eq 124 ]; then say "CUT test_cuda_graph_bwd with $K10=chunked10 at the piece's cap"
  else status=1; say "FAIL test_cuda_graph_bwd with $K10=chunked10 (exit $k10_rc)"; fi
else
  say "kdabwd10 test_cuda_graph_bwd with chunked10 skipped (no time)"
fi
true

# GDN backward chunk kernel, variants wg10 / wg10a / wg10p (LINATTN_CUDA_GDN_BWD_CHUNK=wg10 | wg10a | wg10p;
# src/cuda/gdn/gdn_bwd_chunk_wg.cu;
# perf-notes "Chunk kernel: the M halves before S / dS' (gdnbwd12)"): wg9d (the default) with each head's M halves run
# before dq_inter / dk_inter / xn (they read V^, dO, q, k and Y, not S / dS'), and S / dS' (64 KB) as their own cp.async
# group waited for (one barrier) after the M halves: head 0 only (wg10: the prologue's 128 KB second group becomes
# 64 + 64 KB) or every head (wg10a); wg10p = wg10 with each head's S / dS' prefetched into L2 (head 0's before the
# index loads). Values bitwise equal to wg7 (= wg9d).
# 1. bench 16/32 1x32768 --saved 1 (bwd eager-live p50 is the row to read; fwdbwd graph-replay too):
#    none, wg10, wg10, none (two interleaved rounds); wg10p, wg10a, wg10a, wg10p only with G12_SHARE >= 150.
# 2. tests (test_cuda_gdn_bwd with wg10 exported): Wg10MatchesReferenceAndWg7 bf16_bt64 + fp16_bt32 (fp64 reference,
#    bitwise == wg7, the kernel ran at BT 64 / not at BT 32), Wg10IsDeterministic bf16_bt64 (all three), the graph
#    sequence (wg10, wg10a, wg10p), the switch-error test; capped at what the piece has left (~35 s needed). A FAIL
#    voids the wg10 / wg10a / wg10p bench rows.
# Own clock: G12_SHARE seconds (default 90; 150 adds the wg10p / wg10a rows and their match tests at bf16_bt64).
G12=LINATTN_CUDA_GDN_BWD_CHUNK
g12_end=$(( $(date +%s) + ${G12_SHARE:-90} ))
g12_mine() { local m=$(( g12_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
g12_bench() {  # g12_bench MIN_S SWITCH: one row while the piece has >= MIN_S s left (the tests need ~35)
  [ "$(g12_mine)" -gt "$1" ] || { say "gdnbwd12 bench $2 skipped (piece time spent)"; return; }
  bench 12 "$2" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
}
for sw in none "$G12=wg10" "$G12=wg10" none; do g12_bench 40 "$sw"; done
if [ "${G12_SHARE:-90}" -ge 150 ]; then
  for sw in "$G12=wg10p" "$G12=wg10a" "$G12=wg10a" "$G12=wg10p"; do g12_bench 80 "$sw"; done
fi
g12_d=Dtypes/CudaGdnBwd
g12_f="$g12_d.Wg10MatchesReferenceAndWg7/bf16_bt64:$g12_d.Wg10MatchesReferenceAndWg7/fp16_bt32"
g12_f="$g12_f:$g12_d.Wg10IsDeterministic/bf16_bt64:CudaGdnBwdWg10.*:CudaGdnBwdChunkSwitch.*"
[ "${G12_SHARE:-90}" -ge 150 ] && g12_f="$g12_f:$g12_d.Wg10aMatchesReferenceAndWg7/bf16_bt64"
[ "${G12_SHARE:-90}" -ge 150 ] && g12_f="$g12_f:$g12_d.Wg10pMatchesReferenceAndWg7/bf16_bt64"
if [ "$(g12_mine)" -gt 10 ]; then
  echo "### test_cuda_gdn_bwd with $G12=wg10 ($g12_f)" >>"$OUT/ab-tests.txt"
  env $G12=wg10 timeout "$(cap "$(g12_mine)")" stdbuf -oL -eL "$BIN/test_cuda_gdn_bwd" --gtest_brief=1 \
    --gtest_filter="$g12_f" >>"$OUT/ab-tests.txt" 2>&1
  g12rc=$?
  if [ $g12rc -eq 0 ]; then
    say "PASS test_cuda_gdn_bwd Wg10 with $G12=wg10"
  else
    status=1; say "FAIL test_cuda_gdn_bwd Wg10 with $G12=wg10 (exit $g12rc; 124 = the cap): wg10* bench rows void"
  fi
else
  say "gdnbwd12 wg10 tests skipped (no time)"
fi
true

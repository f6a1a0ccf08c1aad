# GDN backward chunk kernel, variant wg11 (LINATTN_CUDA_GDN_BWD_CHUNK=wg11; src/cuda/gdn/gdn_bwd_chunk_wg.cu,
# gdn_bwd_chunk_wg_kernel.cuh; perf-notes "Chunk kernel: shared loads ahead of the waits (gdnbwd13)"): wg9d (the
# default) with the shared-memory reads of the finishing passes (the M halves' decays and row / column scales, the k
# words of xn's / R K^'s row dots, <S, dS'>'s tiles) issued before the wgmma wait they follow and the Y.v row dot's v
# loads before the head's first barrier. Values bitwise equal to wg9d. Predicted: backward ~2.75 -> ~2.65-2.69 ms.
# 1. bench 16/32 1x32768 --saved 1 (bwd eager-live p50 decides; fwdbwd graph-replay too): none, wg11, wg11, none.
# 2. tests (BT 64 only: BT 32 never takes the wgmma kernel): test_cuda_gdn_bwd's Wg11* tests (fp64 reference,
#    bitwise == wg9d on every case + the long GVA varlen case, the kernel ran, determinism, graph sequence) with
#    wg11 exported, and the switch-error test, in what the piece has left. A FAIL voids the wg11 bench rows.
# Own clock: G13_SHARE seconds (default 90).
G13=LINATTN_CUDA_GDN_BWD_CHUNK
g13_end=$(( $(date +%s) + ${G13_SHARE:-90} ))
g13_mine() { local m=$(( g13_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
g13_bench() {  # g13_bench SWITCH: one row while the piece has >= 35 s left (the tests need ~30)
  [ "$(g13_mine)" -gt 35 ] || { say "gdnbwd13 bench $1 skipped (piece time spent)"; return; }
  bench 15 "$1" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
}
for sw in none "$G13=wg11" "$G13=wg11" none; do g13_bench "$sw"; done
if [ "$(g13_mine)" -gt 10 ]; then
  echo "### test_cuda_gdn_bwd with $G13=wg11 (Wg11, BT 64; the switch-error test)" >>"$OUT/ab-tests.txt"
  env $G13=wg11 timeout "$(cap "$(g13_mine)")" stdbuf -oL -eL "$BIN/test_cuda_gdn_bwd" --gtest_brief=1 \
    --gtest_filter='Dtypes/CudaGdnBwd.Wg11*/*_bt64:CudaGdnBwdWg11.*:CudaGdnBwdChunkSwitch.*' >>"$OUT/ab-tests.txt" 2>&1
  g13rc=$?
  if [ $g13rc -eq 0 ]; then
    say "PASS test_cuda_gdn_bwd Wg11 with $G13=wg11"
  elif [ $g13rc -eq 124 ]; then  # the cap, not a failure: what ran is in ab-tests.txt
    say "CUT test_cuda_gdn_bwd Wg11 with $G13=wg11 (the piece's cap; read ab-tests.txt: wg11 not fully verified)"
  else
    status=1; say "FAIL test_cuda_gdn_bwd Wg11 with $G13=wg11 (exit $g13rc; 124 = the cap): wg11 bench rows void"
  fi
else
  say "gdnbwd13 wg11 tests skipped (no time)"
fi
true

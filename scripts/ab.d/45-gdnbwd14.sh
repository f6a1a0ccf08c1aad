# GDN backward chunk kernel, variant wg12 (LINATTN_CUDA_GDN_BWD_CHUNK=wg12; src/cuda/gdn/gdn_bwd_chunk_wg.cu,
# gdn_bwd_chunk_wg_kernel.cuh, gdn_bwd_chunk_wg_tma.cuh; perf-notes "Chunk kernel: TMA tiles, the last finish under
# the stores (gdnbwd14)"): wg11 (the default) with a full chunk's tiles loaded by TMA (one thread per load group,
# mbarriers; partial chunks and a converted d_o keep cp.async) and the last head's finish (warp 0) run while warps
# 1-15 do the staged dq / dk stores. Values bitwise equal to wg11. Predicted: backward 2.68 -> ~2.55-2.62 ms.
# 1. bench 16/32 1x32768 --saved 1 (bwd eager-live p50 decides; fwdbwd graph-replay too): none, wg12, wg12, none.
# 2. tests (BT 64 only: BT 32 never takes the wgmma kernel): test_cuda_gdn_bwd's Wg12* tests (fp64 reference,
#    bitwise == wg11 on every case + the long GVA varlen case, the kernel ran, determinism, graph sequence) with
#    wg12 exported, and the switch-error test, in what the piece has left. A FAIL voids the wg12 bench rows.
# Own clock: G14_SHARE seconds (default 120).
G14=LINATTN_CUDA_GDN_BWD_CHUNK
g14_end=$(( $(date +%s) + ${G14_SHARE:-120} ))
g14_mine() { local m=$(( g14_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
g14_bench() {  # g14_bench SWITCH: one row while the piece has >= 45 s left (the tests need ~40)
  [ "$(g14_mine)" -gt 45 ] || { say "gdnbwd14 bench $1 skipped (piece time spent)"; return; }
  bench 15 "$1" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 5 --saved 1 --commit "$COMMIT"
}
for sw in none "$G14=wg12" "$G14=wg12" none; do g14_bench "$sw"; done
if [ "$(g14_mine)" -gt 10 ]; then
  echo "### test_cuda_gdn_bwd with $G14=wg12 (Wg12, BT 64; the switch-error test)" >>"$OUT/ab-tests.txt"
  env $G14=wg12 timeout "$(cap "$(g14_mine)")" stdbuf -oL -eL "$BIN/test_cuda_gdn_bwd" --gtest_brief=1 \
    --gtest_filter='Dtypes/CudaGdnBwd.Wg12*/*_bt64:CudaGdnBwdWg12.*:CudaGdnBwdChunkSwitch.*' >>"$OUT/ab-tests.txt" 2>&1
  g14rc=$?
  if [ $g14rc -eq 0 ]; then
    say "PASS test_cuda_gdn_bwd Wg12 with $G14=wg12"
  elif [ $g14rc -eq 124 ]; then  # the cap, not a failure: what ran is in ab-tests.txt
    say "CUT test_cuda_gdn_bwd Wg12 with $G14=wg12 (the piece's cap; read ab-tests.txt: wg12 not fully verified)"
  else
    status=1; say "FAIL test_cuda_gdn_bwd Wg12 with $G14=wg12 (exit $g14rc; 124 = the cap): wg12 bench rows void"
  fi
else
  say "gdnbwd14 wg12 tests skipped (no time)"
fi
true

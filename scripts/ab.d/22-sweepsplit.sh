# GDN backward sweeps, variants wgr / wgrl (LINATTN_CUDA_GDN_BWD_SWEEP=wgr | wgrl; src/cuda/gdn/gdn_bwd_sweep_wgr.cu;
# perf-notes "Sweeps: the dS^T key split, analysed; the product order tested (sweepsplit)"): wg3 (the default) with
# role 1's dS^T += dO^T diag(osc) Q moved off the dV^T -> dv^T path (issued after dv^T, its own commit group,
# wait<1>), dO^T diag(osc) formed under dS^T K^T; wgrl also issues the next chunk's input ring after the first
# products. Outputs bitwise wg3's. Compiled here, never run on a GPU before. It tests whether the reverse chain
# step is set by its dependent wgmma round trips (the assumption behind the dS^T key split).
# 1. bench 16/32 1x32768 --saved 1 (the bwd eager-live p50 is the row to read): none, wgr, wgrl, then wgrl, wgr,
#    none (two interleaved rounds) while the piece has >= 40 s left.
# 2. tests: test_cuda_gdn_bwd's CudaGdnBwdSweepWgr.* (fp64 reference + bitwise == wg on every case and the long
#    GVA varlen case at bf16 / fp16 BT 64, the kernel ran, determinism, graph sequence; wgr and wgrl), capped at
#    what the piece has left (~35 s expected). A FAIL voids the wgr / wgrl bench rows.
# Own clock: SS_SHARE seconds (default 90).
SSW=LINATTN_CUDA_GDN_BWD_SWEEP
ss_end=$(( $(date +%s) + ${SS_SHARE:-90} ))
ss_mine() { local m=$(( ss_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
ss_bench() {  # ss_bench SWITCH: one row while the piece has >= 40 s left (the tests need ~35)
  [ "$(ss_mine)" -gt 40 ] || { say "sweepsplit bench $1 skipped (piece time spent)"; return; }
  bench 12 "$1" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
}
for sw in none "$SSW=wgr" "$SSW=wgrl" "$SSW=wgrl" "$SSW=wgr" none; do ss_bench "$sw"; done
if [ "$(ss_mine)" -gt 15 ]; then
  echo "### test_cuda_gdn_bwd CudaGdnBwdSweepWgr.* (wgr, wgrl; BT 64)" >>"$OUT/ab-tests.txt"
  timeout "$(cap "$(ss_mine)")" stdbuf -oL -eL "$BIN/test_cuda_gdn_bwd" --gtest_brief=1 \
    --gtest_filter='CudaGdnBwdSweepWgr.*' >>"$OUT/ab-tests.txt" 2>&1
  ssrc=$?
  if [ $ssrc -eq 0 ]; then
    say "PASS test_cuda_gdn_bwd CudaGdnBwdSweepWgr.* (wgr, wgrl)"
  else
    status=1; say "FAIL test_cuda_gdn_bwd CudaGdnBwdSweepWgr.* (exit $ssrc; 124 = the cap): wgr / wgrl bench rows void"
  fi
else
  say "sweepsplit wgr tests skipped (no time)"
fi
true

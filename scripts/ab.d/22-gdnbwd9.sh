# GDN backward chunk kernel, variant wg7 (LINATTN_CUDA_GDN_BWD_CHUNK=wg7; src/cuda/gdn/gdn_bwd_chunk_wg.cu;
# perf-notes "Chunk kernel: split head loads (gdnbwd9)"): wg4 (the default) with each head's tiles in two
# cp.async groups (Ai / dV^ go out at the previous head's second barrier, the head starts on them alone; S,
# dS', V^, dO land under Y), the Y.v row dot's v loads under the Y product, each M half's X / staged stores
# under its second product, warp 0's finish under the next head's Y (row-dot partials double-buffered, no
# end-of-head barrier but the last); values bitwise equal to wg4.
# Compiled here, never run on a GPU before this piece.
# 1. tests (BT 64: BT 32 never takes the wgmma kernel): test_cuda_gdn_bwd's Wg7* tests (fp64 reference and
#    bitwise == wg4 on every case + the long GVA varlen case, the wg7 kernel must have run, determinism, graph
#    sequence) with wg7 exported, own cap 50 s; then test_cuda_graph_bwd's GDN tests and the training-cache
#    graph sequence with wg7 exported (15 s).
#    No bench if a test fails or is cut (exit 124 = the cap: said so, counted as a failure).
# 2. bench, default / wg7 interleaved (bwd eager-live p50 is the row to read; fwdbwd graph-replay too):
#    16/32 1x32768, the same with --saved 1 (training cache), 1x8192, 4096x8; then a second round in the
#    reverse order (wg7 first) while the piece has time.
# Own clock: G9_SHARE seconds (default 90: the tests and the first round; G9_SHARE=180 gives both rounds).
G9=LINATTN_CUDA_GDN_BWD_CHUNK
g9ok=0
g9_end=$(( $(date +%s) + ${G9_SHARE:-90} ))
g9_mine() { local m=$(( g9_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
g9_test() {  # g9_test BINARY FILTER CAP: with wg7 exported; sets g9rc
  echo "### $1 with $G9=wg7 (filter $2)" >>"$OUT/ab-tests.txt"
  env $G9=wg7 timeout "$(cap "$3")" stdbuf -oL -eL "$BIN/$1" --gtest_brief=1 --gtest_filter="$2" \
    >>"$OUT/ab-tests.txt" 2>&1
  g9rc=$?
}
if [ "$(g9_mine)" -gt 50 ]; then
  g9_test test_cuda_gdn_bwd 'Dtypes/CudaGdnBwd.Wg7*/*_bt64:CudaGdnBwdWg7.*' 50
  if [ $g9rc -eq 0 ]; then
    g9_test test_cuda_graph_bwd 'CudaGraphGdn*:CudaGraphFwdBwd.*' 15
    if [ $g9rc -eq 0 ]; then
      g9ok=1; say "PASS test_cuda_gdn_bwd Wg7 + test_cuda_graph_bwd GDN with $G9=wg7"
    else
      status=1; say "FAIL test_cuda_graph_bwd GDN with $G9=wg7 (exit $g9rc; 124 = the 15 s cap): no bench"
    fi
  else
    status=1; say "FAIL test_cuda_gdn_bwd Wg7 with $G9=wg7 (exit $g9rc; 124 = the 50 s cap): no bench"
  fi
else
  say "gdnbwd9 wg7 tests skipped (no time)"
fi
g9_bench() {  # g9_bench SWITCH linattn-args...: one row while the piece has >= 6 s left
  local sw=$1
  shift
  [ "$(g9_mine)" -gt 6 ] || { say "gdnbwd9 bench $sw $* skipped (piece time spent)"; return; }
  bench $(( $(g9_mine) < 20 ? $(g9_mine) : 20 )) "$sw" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --iters 10 \
    --commit "$COMMIT" "$@"
}
if [ $g9ok = 1 ]; then
  for a in "--lengths 1x32768" "--lengths 1x32768 --saved 1" "--lengths 1x8192" "--lengths 4096x8"; do
    g9_bench none $a
    g9_bench $G9=wg7 $a
  done
  for a in "--lengths 4096x8" "--lengths 1x8192" "--lengths 1x32768 --saved 1" "--lengths 1x32768"; do
    g9_bench $G9=wg7 $a
    g9_bench none $a
  done
fi
true

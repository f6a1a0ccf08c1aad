# GDN backward chunk kernel, variant wg6 (LINATTN_CUDA_GDN_BWD_CHUNK=wg6; src/cuda/gdn/gdn_bwd_chunk_wg.cu;
# perf-notes "Chunk kernel: persistent CTAs (gdnbwd8)"): wg4's per-item code (the default) in persistent
# CTAs, one per SM, each walking items (chunk row, q/k head) and loading the next item's head-0 tiles and
# q / k under the current item's tail; values bitwise equal to wg4. Compiled here, never run on a GPU
# before this piece.
# 1. tests, own caps 30 + 12 s, BT 64 (BT 32 never takes the wgmma kernel): test_cuda_gdn_bwd with wg6 exported
#    (ChunkedMatchesReference bf16: every chunked case through wg6; the Wg6* tests: fp64 reference, bitwise == wg4 with the grid at SM
#    count, capped at 3 and at 1 CTA, determinism, graph sequence), then test_cuda_graph_bwd's GDN tests
#    with wg6 exported; no bench if a test fails or is cut (exit 124: said so, counted as a failure);
# 2. bench, interleaved: 16/32 1x32768 default / wg6, the same with --saved 1 (training cache), 1x8192
#    default / wg6, then 1x32768 wg6 / default again while time is left.
# The piece keeps to its own 90 s (mine: seconds of it left).
G8=LINATTN_CUDA_GDN_BWD_CHUNK
g8ok=0
g8_end=$(( $(date +%s) + 90 ))
g8_mine() { local m=$(( g8_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
g8_test() {  # g8_test BINARY FILTER CAP: with wg6 exported; sets g8rc
  echo "### $1 with $G8=wg6 (filter $2)" >>"$OUT/ab-tests.txt"
  env $G8=wg6 timeout "$(cap "$3")" stdbuf -oL -eL "$BIN/$1" --gtest_brief=1 --gtest_filter="$2" \
    >>"$OUT/ab-tests.txt" 2>&1
  g8rc=$?
}
if [ "$(g8_mine)" -gt 50 ]; then
  g8_test test_cuda_gdn_bwd 'Dtypes/CudaGdnBwd.ChunkedMatchesReference/bf16_bt64:Dtypes/CudaGdnBwd.Wg6*/*_bt64:CudaGdnBwdWg6.*' 30
  if [ $g8rc -eq 0 ]; then
    g8_test test_cuda_graph_bwd 'CudaGraphGdn*' 12
    if [ $g8rc -eq 0 ]; then
      g8ok=1; say "PASS test_cuda_gdn_bwd + test_cuda_graph_bwd GDN with $G8=wg6"
    else
      status=1; say "FAIL test_cuda_graph_bwd GDN with $G8=wg6 (exit $g8rc; 124 = the cap): no bench"
    fi
  else
    status=1; say "FAIL test_cuda_gdn_bwd with $G8=wg6 (exit $g8rc; 124 = the 30 s cap): no bench"
  fi
else
  say "gdnbwd8 wg6 tests skipped (no time)"
fi
g8_bench() {  # g8_bench SWITCH linattn-args...: one row while the piece has >= 6 s left
  local sw=$1
  shift
  [ "$(g8_mine)" -gt 6 ] || { say "gdnbwd8 bench $sw $* skipped (piece time spent)"; return; }
  bench $(( $(g8_mine) < 20 ? $(g8_mine) : 20 )) "$sw" bench-cuda-bwd --hqk 16 --hv 32 --iters 10 --commit "$COMMIT" "$@"
}
if [ $g8ok = 1 ]; then
  g8_bench none --lengths 1x32768
  g8_bench $G8=wg6 --lengths 1x32768
  g8_bench none --lengths 1x32768 --saved 1
  g8_bench $G8=wg6 --lengths 1x32768 --saved 1
  g8_bench none --lengths 1x8192
  g8_bench $G8=wg6 --lengths 1x8192
  g8_bench $G8=wg6 --lengths 1x32768
  g8_bench none --lengths 1x32768
fi
true

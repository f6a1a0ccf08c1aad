# GDN backward chunk kernel, variants wg4 / wg5 (LINATTN_CUDA_GDN_BWD_CHUNK=wg4|wg5; src/cuda/gdn/
# gdn_bwd_chunk_wg.cu; perf-notes "Chunk kernel: products in flight together (gdnbwd7)"): wg3 (the
# default) with dq_inter / dk_inter and R K^ / Pd K^ issued back to back (wg4), plus Y issued ahead of
# the first pair (wg5); values bitwise equal to wg3. Compiled here, never run on a GPU before this piece.
# 1. tests at BT 64 (BT 32 never takes the wgmma kernel): wg5 bf16 + fp16 (every case against the fp64
#    reference and bitwise == wg3; determinism), wg4 bf16 (reference, bitwise == wg3); the graph
#    sequences are left to the full binary (time); own cap 30 s; no bench of the variants if they fail
#    or time out (exit 124: said so, counted as a failure);
# 2. bench at 16/32 1x32768: default (wg3), wg4, wg5, then wg5, wg4, default (interleaved, reversed).
# Rows into bench.jsonl with env_switch. The piece keeps to its own 60 s (mine: seconds of it left).
SWC=LINATTN_CUDA_GDN_BWD_CHUNK
chunkok=0
piece_end=$(( $(date +%s) + 100 ))
mine() { local m=$(( piece_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
if [ "$(left)" -gt 40 ]; then
  F='Dtypes/CudaGdnBwd.Wg5*/*_bt64:Dtypes/CudaGdnBwd.Wg4MatchesReferenceAndWg3/bf16_bt64'
  echo "### test_cuda_gdn_bwd with $SWC=wg5 (filter $F)" >>"$OUT/ab-tests.txt"
  env $SWC=wg5 timeout "$(cap 30)" stdbuf -oL -eL "$BIN/test_cuda_gdn_bwd" --gtest_brief=1 --gtest_filter="$F" \
    >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    chunkok=1; say "PASS test_cuda_gdn_bwd wg4 / wg5 ($SWC=wg5)"
  else
    status=1; say "FAIL test_cuda_gdn_bwd wg4 / wg5 (exit $rc; 124 = the 30 s cap): no bench of them"
  fi
else
  say "gdnbwdchunk wg4 / wg5 tests skipped (no time)"
fi
if [ $chunkok = 1 ]; then  # one switch per run, interleaved; each while the piece has >= 6 s left
  for sw in none $SWC=wg4 $SWC=wg5 $SWC=wg5 $SWC=wg4 none; do
    [ "$(mine)" -gt 6 ] || { say "gdnbwdchunk bench $sw skipped (piece time spent)"; continue; }
    bench $(( $(mine) < 25 ? $(mine) : 25 )) "$sw" bench-cuda-bwd --hqk 16 --hv 32 --lengths 1x32768 --iters 10 \
      --commit "$COMMIT"
  done
fi

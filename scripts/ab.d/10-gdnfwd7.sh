# GDN forward, state-chain modes of the pipelined fused kernel (LINATTN_CUDA_GDN_CHAIN = '+'-joined il / tma /
# tma2; src/cuda/gdn/gdn_fused_wgp.cu, gdn_fused_wgp_tma.cuh; perf-notes "State chain: the TMA ring (gdnfwd7)"):
# tma = WG0's k / v / Ab ring filled by four TMA boxes from one thread on per-stage mbarriers instead of 19
# per-thread cp.asyncs (ncu at 3d3a678: ~29% of WG0's samples were that issue code); tma2 = WG1's q / P ring
# too (~20% of WG1's samples); il = the register passes interleaved with the wgmma steps. Values bitwise the
# step-3 chain's (=v3, the default). Compiled here, never run on a GPU before this piece. Prediction: forward
# 16/64 1x32768 1.585 -> ~1.40-1.48 ms.
# 1. test_cuda_gdn_fwd's chain cases (tma, il, tma2+il; bf16 / fp16: fp64 reference incl. varlen partial
#    chunks, both state layouts, GVA; bitwise == v3; the TMA instance ran), then the GDN graph tests with
#    tma2+il forced (graph replay == eager fixed, bitwise; LINATTN_CUDA_WGMMA=1 so their short batches take
#    the pipelined kernel), memcheck of one TMA case; no bench if the chain tests fail or time out;
# 2. bench default vs tma2+il interleaved (16/64 1x32768, 4096x8, 1x2048 with --check 1; 2/8 1x32768
#    tier 3), a second round with the variant first, and tma+il / tma2 alone at 1x32768.
# Rows into bench.jsonl with env_switch. The piece keeps to its own 90 s (mine: seconds of it left).
SWC=LINATTN_CUDA_GDN_CHAIN
chainok=0
piece_end=$(( $(date +%s) + 90 ))
mine() { local m=$(( piece_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
if [ "$(mine)" -gt 60 ]; then
  g7f='DtypesAndModes/CudaGdnFwdChain.*'
  echo "### test_cuda_gdn_fwd (filter $g7f; the tests set $SWC themselves)" >>"$OUT/ab-tests.txt"
  timeout "$(cap 30)" stdbuf -oL -eL "$BIN/test_cuda_gdn_fwd" --gtest_brief=1 --gtest_filter="$g7f" >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    chainok=1; say "PASS test_cuda_gdn_fwd chain modes ($SWC=tma|il|tma2+il)"
  else
    status=1; say "FAIL test_cuda_gdn_fwd chain modes (exit $rc; 124 = the 30 s cap): no bench of them"
  fi
  if [ $chainok = 1 ] && [ "$(mine)" -gt 50 ]; then
    echo "### test_cuda_graph 'CudaGraphGdn*' with $SWC=tma2+il LINATTN_CUDA_WGMMA=1" >>"$OUT/ab-tests.txt"
    env $SWC=tma2+il LINATTN_CUDA_WGMMA=1 timeout "$(cap 15)" stdbuf -oL -eL "$BIN/test_cuda_graph" --gtest_brief=1 \
      --gtest_filter='CudaGraphGdn*' >>"$OUT/ab-tests.txt" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then say "PASS test_cuda_graph GDN with $SWC=tma2+il"; else status=1; say "FAIL test_cuda_graph GDN with $SWC=tma2+il (exit $rc)"; fi
  fi
  if [ $chainok = 1 ] && [ "$(mine)" -gt 45 ]; then
    g7mc='DtypesAndModes/CudaGdnFwdChain.MatchesReference/bf16_tma2_il'
    echo "### memcheck $g7mc" >>"$OUT/ab-tests.txt"
    LINATTN_SANITIZED=1 timeout "$(cap 12)" compute-sanitizer --tool memcheck --error-exitcode 99 \
      "$BIN/test_cuda_gdn_fwd" --gtest_filter="$g7mc" >>"$OUT/ab-tests.txt" 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && status=1
    say "gdnfwd7 memcheck: exit $rc (124 = cut by its cap) ($(grep -E 'ERROR SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
  fi
else
  say "gdnfwd7 tests skipped (no time)"
fi
if [ $chainok = 1 ]; then  # one switch per run, interleaved; each while the piece has >= 6 s left
  g7v=$SWC=tma2+il
  for g7row in "1x32768 1 none" "1x32768 1 $g7v" "4096x8 1 none" "4096x8 1 $g7v" "1x2048 1 none" "1x2048 1 $g7v" \
             "t3 0 none" "t3 0 $g7v" "1x32768 1 $g7v" "1x32768 1 none" "1x32768 1 $SWC=tma+il" "1x32768 1 $SWC=tma2" \
             "4096x8 1 $g7v" "4096x8 1 none" "t3 0 $g7v" "t3 0 none" "1x2048 1 $g7v" "1x2048 1 none"; do
    set -- $g7row
    [ "$(mine)" -gt 6 ] || { say "gdnfwd7 bench $g7row skipped (piece time spent)"; continue; }
    g7c=$(( $(mine) < 25 ? $(mine) : 25 ))
    if [ "$1" = t3 ]; then
      bench $g7c "$3" bench-cuda --hqk 2 --hv 8 --lengths 1x32768 --segments 0 --iters 30 --check 0 --commit "$COMMIT"
    else
      bench $g7c "$3" bench-cuda --hqk 16 --hv 64 --lengths "$1" --segments "$2" --iters 20 --check 1 --commit "$COMMIT"
    fi
  done
fi

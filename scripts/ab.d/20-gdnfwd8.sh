# GDN forward, chain mode tma3 (LINATTN_CUDA_GDN_CHAIN=tma3; src/cuda/gdn/gdn_chain_scales.cuh, gdn_prep.cu,
# gdn_fused_wgp*.cu/cuh; perf-notes "State chain: the prep's scale records (gdnfwd8)"): the prep stores the
# per-token scales (e^gam rk, e^(gam_L - gam) rk, e^gam_L, scale e^gam rq) per (chunk, value head), and the
# default tma2 kernel bulk-copies them beside its TMA boxes instead of forming them in WG0's / WG1's chunk
# loops (ncu at 3d3a678: ~20% of WG0's samples). Same expressions: bitwise the default's values. Compiled
# here, never run on a GPU before this piece. Prediction: 16/64 1x32768 graph 1.45 -> ~1.33-1.38 ms.
# 1. test_cuda_gdn_fwd's tma3 chain cases (bf16 / fp16: fp64 reference incl. varlen partial chunks, both
#    state layouts, GVA, h0 / ht; bitwise == v3 and == the default; the tma3 instance ran) and the workspace
#    test; then with tma3 forced: the GDN graph tests (replay == eager fixed), the training-cache test
#    (forward fills the cache, scales in the workspace), the tier-3 GDN forward tests (the output pass
#    takes this kernel), memcheck of one case; no bench if the chain tests fail or time out;
# 2. bench default vs tma3 interleaved (16/64 1x32768, 4096x8, 1x2048 with --check 1), a second round with
#    the variant first, then tier 3 2/8 1x32768. Rows into bench.jsonl with env_switch. Own 90 s.
g8sw=LINATTN_CUDA_GDN_CHAIN
g8ok=0
g8end=$(( $(date +%s) + 90 ))
g8left() { local m=$(( g8end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
g8test() {  # g8test CAP BINARY FILTER: with tma3 (and the pipelined kernel everywhere) forced
  [ "$(g8left)" -gt $(( $1 + 30 )) ] || { say "gdnfwd8: $2 skipped (no time)"; return; }
  echo "### $2 ($3) with $g8sw=tma3 LINATTN_CUDA_WGMMA=1" >>"$OUT/ab-tests.txt"
  env $g8sw=tma3 LINATTN_CUDA_WGMMA=1 timeout "$(cap "$1")" stdbuf -oL -eL "$BIN/$2" --gtest_brief=1 \
    --gtest_filter="$3" >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then say "PASS $2 ($3) with $g8sw=tma3"; else status=1; say "FAIL $2 ($3) with $g8sw=tma3 (exit $rc)"; fi
}
if [ "$(g8left)" -gt 60 ]; then
  g8f='DtypesAndModes/CudaGdnFwdChain.*tma3:CudaGdnFwdChainTma3.*'
  echo "### test_cuda_gdn_fwd (filter $g8f; the tests set $g8sw themselves)" >>"$OUT/ab-tests.txt"
  timeout "$(cap 20)" stdbuf -oL -eL "$BIN/test_cuda_gdn_fwd" --gtest_brief=1 --gtest_filter="$g8f" >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    g8ok=1; say "PASS test_cuda_gdn_fwd tma3 chain cases"
  else
    status=1; say "FAIL test_cuda_gdn_fwd tma3 chain cases (exit $rc; 124 = the 20 s cap): no bench of tma3"
  fi
  if [ $g8ok = 1 ]; then
    g8test 10 test_cuda_graph 'CudaGraphGdn*'
    g8test 8 test_cuda_graph_bwd 'CudaGraphFwdBwd.TrainingCacheReplayEqualsEagerWithoutCache'
    g8test 8 test_cuda_tier3 'Dtypes/CudaTier3Fwd.GdnMatchesReferenceAndTier1/*'
  fi
  if [ $g8ok = 1 ] && [ "$(g8left)" -gt 45 ] && command -v compute-sanitizer >/dev/null 2>&1; then
    g8mc='DtypesAndModes/CudaGdnFwdChain.MatchesReference/bf16_tma3'
    echo "### memcheck $g8mc" >>"$OUT/ab-tests.txt"
    LINATTN_SANITIZED=1 timeout "$(cap 10)" compute-sanitizer --tool memcheck --error-exitcode 99 \
      "$BIN/test_cuda_gdn_fwd" --gtest_filter="$g8mc" >>"$OUT/ab-tests.txt" 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && status=1
    say "gdnfwd8 memcheck: exit $rc (124 = cut by its cap) ($(grep -E 'ERROR SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
  fi
else
  say "gdnfwd8 tests skipped (no time)"
fi
if [ $g8ok = 1 ]; then  # one switch per run, interleaved; each while the piece has >= 6 s left
  g8v=$g8sw=tma3
  for g8row in "1x32768 1 none" "1x32768 1 $g8v" "4096x8 1 none" "4096x8 1 $g8v" "1x2048 1 none" "1x2048 1 $g8v" \
               "1x32768 1 $g8v" "1x32768 1 none" "4096x8 1 $g8v" "4096x8 1 none" "1x2048 1 $g8v" "1x2048 1 none" \
               "t3 0 none" "t3 0 $g8v"; do
    set -- $g8row
    [ "$(g8left)" -gt 6 ] || { say "gdnfwd8 bench $g8row skipped (piece time spent)"; continue; }
    g8c=$(( $(g8left) < 25 ? $(g8left) : 25 ))
    if [ "$1" = t3 ]; then
      bench $g8c "$3" bench-cuda --hqk 2 --hv 8 --lengths 1x32768 --segments 0 --iters 30 --check 0 --commit "$COMMIT"
    else
      bench $g8c "$3" bench-cuda --hqk 16 --hv 64 --lengths "$1" --segments "$2" --iters 20 --check 1 --commit "$COMMIT"
    fi
  done
fi
true

# GDN forward, two chain CTAs per SM (LINATTN_CUDA_WGP_X2=1; src/cuda/gdn/gdn_fused_wgp_x2.cu, the warpgroups of
# gdn_fused_wgp_vs32.cuh on WgpSmemT<T, false, 32, 2, 1, 1>: 2-stage k / v / Ab ring, 1-stage q / P, one hand-off
# buffer, ~109 KB, 128 registers; perf-notes "Two chain CTAs per SM (gdnx2)"): GDN's pipelined forward at V-slice
# 32 whatever the plan, two CTAs resident per SM so one CTA's dependent wgmma / barrier round trips hide behind
# the other's. Same arithmetic and order as the V-slice 32 instance: bitwise its values. Compiled here, never run
# on a GPU before this piece. Prediction: 16/64 1x32768 1.263 -> ~1.08-1.18 ms, 4096x8 1.358 -> ~1.15-1.25 ms.
# 1. test_cuda_gdn_fwd's x2 cases (fp64 reference at planned V-slices 32 / 64, the instance ran; bitwise
#    == the V-slice 32 instance: varlen partial chunks, GVA, h0 / ht, both state layouts), then with the switch
#    (and the pipelined kernel everywhere) forced: the GDN graph tests (replay == eager fixed), the tier-3 GDN
#    forward tests, KDA's guard (x2 leaves KDA on its V-slice); no bench if the x2 tests fail or time out
#    (a racecheck of Dtypes/CudaGdnFwdX2.MatchesReferenceAtEveryPlannedVSlice/bf16 is worth a run of its own);
# 2. bench default vs x2 interleaved, the variant first in the second round: 16/64 1x32768 and 4096x8 (two
#    rounds first), then 16/32 1x32768 (128 CTAs: no pairing, the shallower rings alone), 16/64 1x2048,
#    KDA 32/32 1x32768 (x2 does not apply: a control). Own 90 s.
x2sw=LINATTN_CUDA_WGP_X2
x2ok=0
x2end=$(( $(date +%s) + 90 ))
x2left() { local m=$(( x2end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
x2test() {  # x2test CAP BINARY FILTER: with x2 (and the pipelined kernel everywhere) forced
  [ "$(x2left)" -gt $(( $1 + 30 )) ] || { say "gdnx2: $2 skipped (no time)"; return; }
  echo "### $2 ($3) with $x2sw=1 LINATTN_CUDA_WGMMA=1" >>"$OUT/ab-tests.txt"
  env $x2sw=1 LINATTN_CUDA_WGMMA=1 timeout "$(cap "$1")" stdbuf -oL -eL "$BIN/$2" --gtest_brief=1 \
    --gtest_filter="$3" >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then say "PASS $2 ($3) with $x2sw=1"; else status=1; say "FAIL $2 ($3) with $x2sw=1 (exit $rc)"; fi
}
if [ "$(x2left)" -gt 60 ]; then
  x2f='Dtypes/CudaGdnFwdX2.*'
  echo "### test_cuda_gdn_fwd (filter $x2f; the tests set $x2sw themselves)" >>"$OUT/ab-tests.txt"
  timeout "$(cap 25)" stdbuf -oL -eL "$BIN/test_cuda_gdn_fwd" --gtest_brief=1 --gtest_filter="$x2f" >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    x2ok=1; say "PASS test_cuda_gdn_fwd x2 cases"
  else
    status=1; say "FAIL test_cuda_gdn_fwd x2 cases (exit $rc; 124 = the 25 s cap): no bench of x2"
  fi
  if [ $x2ok = 1 ]; then
    x2test 10 test_cuda_graph 'CudaGraphGdn*'
    x2test 8 test_cuda_tier3 'Dtypes/CudaTier3Fwd.GdnMatchesReferenceAndTier1/*'
    x2test 5 test_cuda_kda_fwd 'CudaKdaFwdWgmma.X2SwitchLeavesKda'
  fi
else
  say "gdnx2 tests skipped (no time)"
fi
if [ $x2ok = 1 ]; then  # one switch per run, interleaved; each while the piece has >= 6 s left
  x2v=$x2sw=1
  for x2row in "16 64 1x32768 none" "16 64 1x32768 $x2v" "16 64 4096x8 none" "16 64 4096x8 $x2v" \
               "16 64 1x32768 $x2v" "16 64 1x32768 none" "16 64 4096x8 $x2v" "16 64 4096x8 none" \
               "16 32 1x32768 none" "16 32 1x32768 $x2v" "16 64 1x2048 none" "16 64 1x2048 $x2v" \
               "kda 32 1x32768 none" "kda 32 1x32768 $x2v" \
               "16 32 1x32768 $x2v" "16 32 1x32768 none" "16 64 1x2048 $x2v" "16 64 1x2048 none" \
               "kda 32 1x32768 $x2v" "kda 32 1x32768 none"; do
    set -- $x2row
    [ "$(x2left)" -gt 6 ] || { say "gdnx2 bench $x2row skipped (piece time spent)"; continue; }
    x2c=$(( $(x2left) < 25 ? $(x2left) : 25 ))
    if [ "$1" = kda ]; then
      bench $x2c "$4" bench-cuda --op kda --hqk 32 --hv 32 --lengths "$3" --segments 0 --iters 20 --check 0 --commit "$COMMIT"
    else
      bench $x2c "$4" bench-cuda --hqk "$1" --hv "$2" --lengths "$3" --segments 0 --iters 20 --check 1 --commit "$COMMIT"
    fi
  done
fi
true

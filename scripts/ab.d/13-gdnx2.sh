# GDN forward, two chain CTAs per SM (LINATTN_CUDA_WGP_X2=1; src/cuda/gdn/gdn_fused_wgp_x2.cu, the warpgroups of
# gdn_fused_wgp_vs32.cuh on WgpSmemT<T, false, 32, 2, 1, 1>: 2-stage k / v / Ab ring, 1-stage q / P, one hand-off
# buffer, ~109 KB, 128 registers; perf-notes "Two chain CTAs per SM (gdnx2)"): GDN's pipelined forward at V-slice
# 32 whatever the plan, two CTAs resident per SM so one CTA's dependent wgmma / barrier round trips hide behind
# the other's. Same arithmetic and order as the V-slice 32 instance: bitwise its values. Compiled here, never run
# on a GPU before this piece. Prediction: 16/64 1x32768 1.263 -> ~1.10-1.15 ms, 4096x8 1.358 -> ~1.15-1.25 ms.
# 1. test_cuda_gdn_fwd's x2 cases (fp64 reference at planned V-slices 32 / 64 / 128, the instance ran; bitwise
#    == the V-slice 32 instance: varlen partial chunks, GVA, h0 / ht, both state layouts), then with the switch
#    (and the pipelined kernel everywhere) forced: the GDN graph tests (replay == eager fixed), the tier-3 GDN
#    forward tests; a racecheck of one x2 case; no bench if the x2 tests fail or time out;
# 2. bench default vs x2 interleaved (16/64 1x32768, 4096x8, 1x2048; 16/32 1x32768; KDA 32/32 1x32768, where
#    x2 does not apply: a control), a second round with the variant first. Own 90 s.
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
  timeout "$(cap 20)" stdbuf -oL -eL "$BIN/test_cuda_gdn_fwd" --gtest_brief=1 --gtest_filter="$x2f" >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    x2ok=1; say "PASS test_cuda_gdn_fwd x2 cases"
  else
    status=1; say "FAIL test_cuda_gdn_fwd x2 cases (exit $rc; 124 = the 20 s cap): no bench of x2"
  fi
  if [ $x2ok = 1 ]; then
    x2test 10 test_cuda_graph 'CudaGraphGdn*'
    x2test 8 test_cuda_tier3 'Dtypes/CudaTier3Fwd.GdnMatchesReferenceAndTier1/*'
  fi
  if [ $x2ok = 1 ] && [ "$(x2left)" -gt 50 ] && command -v compute-sanitizer >/dev/null 2>&1; then
    x2rc='Dtypes/CudaGdnFwdX2.MatchesReferenceAtEveryPlannedVSlice/bf16'
    echo "### racecheck $x2rc" >>"$OUT/ab-tests.txt"
    LINATTN_SANITIZED=1 timeout "$(cap 10)" compute-sanitizer --tool racecheck --error-exitcode 99 \
      "$BIN/test_cuda_gdn_fwd" --gtest_filter="$x2rc" >>"$OUT/ab-tests.txt" 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && status=1
    say "gdnx2 racecheck: exit $rc (124 = cut by its cap) ($(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
  fi
else
  say "gdnx2 tests skipped (no time)"
fi
if [ $x2ok = 1 ]; then  # one switch per run, interleaved; each while the piece has >= 6 s left
  x2v=$x2sw=1
  for x2row in "16 64 1x32768 none" "16 64 1x32768 $x2v" "16 64 4096x8 none" "16 64 4096x8 $x2v" \
               "16 64 1x2048 none" "16 64 1x2048 $x2v" "16 32 1x32768 none" "16 32 1x32768 $x2v" \
               "kda 32 1x32768 none" "kda 32 1x32768 $x2v" \
               "16 64 1x32768 $x2v" "16 64 1x32768 none" "16 64 4096x8 $x2v" "16 64 4096x8 none" \
               "16 64 1x2048 $x2v" "16 64 1x2048 none" "16 32 1x32768 $x2v" "16 32 1x32768 none" \
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

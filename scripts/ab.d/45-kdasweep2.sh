# KDA backward wgmma sweeps with the hand-off on mbarriers (LINATTN_CUDA_KDA_SWEEP=wgm; opt-in,
# src/cuda/kda/kda_bwd_sweep_wg.cu kMbar; perf-notes "Sweeps on wgmma for KDA: the hand-off on mbarriers
# (kdasweep2)"): the default wg kernel with its full / empty named barriers (racecheck: 32 hazards at 755404e)
# replaced by wg2's mbarrier protocol (count 128, parity waits). Same products, so outputs bitwise equal to wg.
# Predicted (before any GPU run): racecheck 0 hazards; KDA backward 32/32 1x32768 and 512x16 within +-1% of wg.
# This piece (its own clock: 90 s, every step guarded; a cut test skips the rest: a hung mbarrier):
# 1. test_cuda_kda_sweep (cap 30 s; ~20 s expected): wgm vs fp64 reference and bitwise vs wg on every case
#    (bf16 / fp16 at BT 64), the graph case with wgm;
# 2. compute-sanitizer racecheck, then memcheck, of the sanitized varlen-edge case with wgm exported: the wg
#    test then runs wgm in place of wg (the filter runs the mma.sync and wgm sweeps, no wg kernel);
# 3. bench KDA backward 32/32 1x32768 default / wgm, 512x16 default / wgm, then a second round 1x32768
#    wgm / default if time is left.
# Keep rule: tests PASS, racecheck 0 hazards, wgm within noise of wg -> make wgm the default
# (kda_bwd_sweep_wg.cu launch_kda_bwd_sweeps_wg: `!= "wg"` instead of `== "wgm"`) or keep it opt-in.
K2=LINATTN_CUDA_KDA_SWEEP
k2_t0=$(date +%s)
k2_left() { local a=$(( 90 - ($(date +%s) - k2_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
k2_hung=0
k2_test() {  # k2_test CAP BINARY FILTER: the binary with wgm exported, under the piece's own cap
  local c=$1 t=$2 f=$3 rc
  [ $k2_hung = 0 ] || { say "kdasweep2: $t skipped (an earlier run was cut)"; return; }
  [ "$(k2_left)" -gt $(( c + 5 )) ] || { say "kdasweep2: $t skipped (no time)"; return; }
  echo "### $t with $K2=wgm (filter $f)" >>"$OUT/ab-tests.txt"
  env $K2=wgm timeout "$(cap "$c")" stdbuf -oL -eL "$BIN/$t" --gtest_brief=1 --gtest_filter="$f" >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then echo "PASS $t with $K2=wgm" | tee -a "$LOG"
  elif [ $rc -eq 124 ]; then status=1; k2_hung=1; echo "FAIL $t with $K2=wgm (cut at its ${c} s cap: hang?)" | tee -a "$LOG"
  else status=1; echo "FAIL $t with $K2=wgm (exit $rc)" | tee -a "$LOG"; fi
}
k2_san() {  # k2_san TOOL CAP: the sanitized bf16 BT-64 cases with wgm exported
  local f='Dtypes/CudaKdaSweep.WgMatchesReferenceAndMmaSweeps/bf16_bt64' rc
  [ $k2_hung = 0 ] || { say "kdasweep2: $1 skipped (a test was cut)"; return; }
  [ "$(k2_left)" -gt $(( $2 + 3 )) ] || { say "kdasweep2: $1 skipped (no time)"; return; }
  echo "### $1 test_cuda_kda_sweep with $K2=wgm ($f)" >>"$OUT/ab-tests.txt"
  env $K2=wgm LINATTN_SANITIZED=1 timeout "$(cap "$2")" compute-sanitizer --tool "$1" --error-exitcode 99 \
    "$BIN/test_cuda_kda_sweep" --gtest_brief=1 --gtest_filter="$f" >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 124 ] || status=1
  say "kdasweep2: $1 wgm exit $rc ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
}
k2_bench() {  # k2_bench LENGTHS MIN_LEFT SWITCH...: one row per switch, each capped by the piece's time left
  local len=$1 need=$2 sw l
  shift 2
  for sw in "$@"; do
    l=$(k2_left)
    [ "$l" -gt "$need" ] || { say "kdasweep2 bench $sw $len skipped (piece time spent)"; continue; }
    [ $k2_hung = 0 ] || { say "kdasweep2 bench $sw $len skipped (wgm test cut: no A/B)"; continue; }
    bench $(( l < 30 ? l : 30 )) "$sw" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths "$len" --iters 5 \
      --commit "$COMMIT"
  done
}
k2_test 30 test_cuda_kda_sweep '*WgmMatchesReferenceAndWgBitwise/*_bt64:CudaKdaSweepGraph.WgmReplayEqualsEagerFixed'
if command -v compute-sanitizer >/dev/null 2>&1; then
  k2_san racecheck 20  # ~10 s at 755404e (wg: 32 hazards)
  k2_san memcheck 10
else
  say "kdasweep2: no compute-sanitizer"
fi
k2_bench 1x32768 12 none $K2=wgm  # ~8 s a row at 3d4b025
k2_bench 512x16 8 none $K2=wgm
k2_bench 1x32768 12 $K2=wgm none
true

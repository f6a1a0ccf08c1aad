# KDA backward sweeps on wgmma (LINATTN_CUDA_KDA_SWEEP=wg; opt-in, src/cuda/kda/kda_bwd_sweep_wg.cu; perf-notes
# "Sweeps on wgmma for KDA (kdasweep)"): the GDN wg sweeps' layout (state transposed in one warpgroup's
# accumulator, A operands from registers, a store warpgroup) on the KDA prep's qg / kg / kgl / gl; BT 64 only
# (BT 32 keeps mma.sync). Not bitwise the mma.sync sweeps. Not yet run on a GPU.
# Predicted (before measuring): sweeps 2.73 -> ~1.6 ms at KDA 32/32 1x32768 (the GDN wg sweeps' 1.49 ms on the
# same grid plus one more K-wide tile per chunk per role), backward ~11.2 -> ~10.1 ms (-10%); 1x4096 -6 to -8%.
# This piece (its own clock: 90 s of device time, every step guarded):
# 1. tests with the switch forced, own caps (30 s, 15 s): test_cuda_kda_sweep (BT 64 cases of both dtypes vs the
#    fp64 reference and half-bars vs mma.sync, determinism, graph replay == eager; "[kdasweep]" lines say == / !=
#    bitwise vs mma.sync, expected !=), then test_cuda_kda_bwd_chunked's BT-64 bf16 reference case;
# 2. bench KDA backward 32/32 1x32768 default / wg / wg / default, then 1x4096 likewise (rows skipped if the first
#    test was cut at its cap: a hang).
# Flip rule: tests PASS and wg faster at 1x32768 in both rounds -> kda_bwd_sweep_wg.cu
# kda_bwd_sweep_wg_enabled(): `env_or("LINATTN_CUDA_KDA_SWEEP", "wg") == "wg"` (unset = wg; "mma" keeps mma.sync).
KS=LINATTN_CUDA_KDA_SWEEP
ks_t0=$(date +%s)
ks_left() { local a=$(( 90 - ($(date +%s) - ks_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
ks_hung=0
ks_test() {  # ks_test CAP BINARY FILTER: ab_test with the piece's own cap (a hung barrier must not eat 120 s)
  local c=$1 t=$2 f=$3 rc
  [ "$(ks_left)" -gt $(( c + 5 )) ] || { say "kdasweep: $t skipped (no time)"; return; }
  echo "### $t with $KS=wg (filter $f)" >>"$OUT/ab-tests.txt"
  env $KS=wg timeout "$(cap "$c")" stdbuf -oL -eL "$BIN/$t" --gtest_brief=1 --gtest_filter="$f" >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then echo "PASS $t with $KS=wg" | tee -a "$LOG"
  elif [ $rc -eq 124 ]; then status=1; ks_hung=1; echo "FAIL $t with $KS=wg (cut at its ${c} s cap: hang?)" | tee -a "$LOG"
  else status=1; echo "FAIL $t with $KS=wg (exit $rc)" | tee -a "$LOG"; fi
}
ks_bench() {  # ks_bench LENGTHS MIN_LEFT SWITCH...: one row per switch, each capped by the piece's time left
  local len=$1 need=$2 sw l
  shift 2
  for sw in "$@"; do
    l=$(ks_left)
    [ "$l" -gt "$need" ] || { say "kdasweep bench $sw $len skipped (piece time spent)"; continue; }
    [ $ks_hung = 0 ] || { say "kdasweep bench $sw $len skipped (wg test cut: no A/B)"; continue; }
    bench $(( l < 40 ? l : 40 )) "$sw" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths "$len" --iters 5 \
      --commit "$COMMIT"
  done
}
ks_test 30 test_cuda_kda_sweep '*WgMatchesReferenceAndMmaSweeps/*_bt64:*WgIsDeterministic/bf16_bt64:CudaKdaSweepGraph.*'
grep '\[kdasweep\]' "$OUT/ab-tests.txt" | sort | uniq -c | tee -a "$LOG"
[ $ks_hung = 0 ] && ks_test 15 test_cuda_kda_bwd_chunked '*MatchesReferenceAndTokenPath/bf16_bt64'
ks_bench 1x32768 16 none $KS=wg $KS=wg none  # interleaved, two rounds (~12 s a row at 95f8975)
ks_bench 1x4096 8 none $KS=wg $KS=wg none
true

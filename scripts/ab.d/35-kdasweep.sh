# KDA backward sweeps on wgmma (LINATTN_CUDA_KDA_SWEEP=wg; opt-in, src/cuda/kda/kda_bwd_sweep_wg.cu; perf-notes
# "Sweeps on wgmma for KDA (kdasweep)"): the GDN wg sweeps' layout (state transposed in one warpgroup's
# accumulator, A operands from registers, a store warpgroup) on the KDA prep's qg / kg / kgl / gl; BT 64 only
# (BT 32 keeps mma.sync). Not bitwise the mma.sync sweeps. Not yet run on a GPU.
# Predicted (before measuring): sweeps 2.73 -> ~1.6 ms at KDA 32/32 1x32768 (the GDN wg sweeps' 1.49 ms on the
# same grid plus one more K-wide tile per chunk per role), backward ~11.2 -> ~10.1 ms (-10%); 1x4096 -6 to -8%.
# This piece (its own clock: 90 s of device time, every step guarded):
# 1. bench KDA backward 32/32 1x32768, default then wg (round 1);
# 2. tests with the switch forced: test_cuda_kda_sweep (BT 64 cases of both dtypes vs the fp64 reference and
#    half-bars vs mma.sync, determinism, extreme gates, graph replay == eager; "[kdasweep]" lines say == / !=
#    bitwise vs mma.sync, expected !=), then test_cuda_kda_bwd_chunked's BT-64 bf16 reference case;
# 3. bench round 2 at 1x32768 (wg then default), then 1x4096 default / wg / wg / default.
# Flip rule: tests PASS and wg faster at 1x32768 in both rounds -> kda_bwd_sweep_wg.cu
# kda_bwd_sweep_wg_enabled(): `env_or("LINATTN_CUDA_KDA_SWEEP", "wg") == "wg"` (unset = wg; "mma" keeps mma.sync).
KS=LINATTN_CUDA_KDA_SWEEP
ks_t0=$(date +%s)
ks_left() { local a=$(( 90 - ($(date +%s) - ks_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
ks_bench() {  # ks_bench LENGTHS SWITCH...: one row per switch, each capped by the piece's time left
  local len=$1 sw l
  shift
  for sw in "$@"; do
    l=$(ks_left)
    [ "$l" -gt 10 ] || { say "kdasweep bench $sw $len skipped (piece time spent)"; continue; }
    bench $(( l < 40 ? l : 40 )) "$sw" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths "$len" --iters 5 \
      --commit "$COMMIT"
  done
}
ks_bench 1x32768 none $KS=wg  # round 1 (round 2 after the tests, reversed)
if [ "$(ks_left)" -gt 55 ]; then
  ab_test $KS=wg test_cuda_kda_sweep \
    '*WgMatchesReferenceAndMmaSweeps/*_bt64:*WgIsDeterministic/bf16_bt64:CudaKdaSweepExtreme.*:CudaKdaSweepGraph.*'
  grep '\[kdasweep\]' "$OUT/ab-tests.txt" | sort | uniq -c | tee -a "$LOG"
else
  say "kdasweep: test_cuda_kda_sweep skipped (no time)"
fi
if [ "$(ks_left)" -gt 40 ]; then
  ab_test $KS=wg test_cuda_kda_bwd_chunked '*MatchesReferenceAndTokenPath/bf16_bt64'
else
  say "kdasweep: test_cuda_kda_bwd_chunked skipped (no time)"
fi
ks_bench 1x32768 $KS=wg none
ks_bench 1x4096 none $KS=wg $KS=wg none
true

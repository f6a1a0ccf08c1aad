# V-slice 32 of the pipelined fused forward (LINATTN_CUDA_WGP_VS=32; opt-in, src/cuda/gdn/gdn_fused_wgp_vs32.cuh;
# perf-notes "V-slice 32 of the pipelined kernel (kdachain)"): where the planner chose V-slices of 32
# (N * HV * V / 64 under ~0.7 SMs) the pipelined kernel runs 32-column CTAs (S held [key][v], m64n32
# products, S / X / H through shared memory) instead of 64-column ones: KDA 32/32 1x32768 and GDN 16/32
# get 128 CTAs instead of 64. Not bitwise the V-slice-64 kernel (other wgmma shapes): rel RMS bars.
# Predicted (before any GPU run): KDA 32/32 1x32768 fused chain ~0.83 -> ~0.63-0.75 ms (forward 2.05 ->
# ~1.85-1.97 ms); GDN 16/32 1x32768 -0.05 to -0.15 ms, 1x4096 within +-0.02 ms; 4096x8 unchanged (planned 64).
# This piece (its own clock: 90 s, every step guarded; a cut test skips the rest: a hung named barrier):
# 1. test_cuda_kda_fwd / test_cuda_gdn_fwd with the switch exported (the V-slice-32 cases vs the fp64
#    reference and vs V-slice 64; the default-planned cases then take V-slice 32 too), the GDN / KDA graph tests;
# 2. compute-sanitizer memcheck, then racecheck, of one small KDA case with the switch;
# 3. bench default vs VS 32 interleaved: kda 32/32 1x32768, 4096x8, gdn 16/32 1x4096, 1x32768, then a
#    second round of kda 1x32768 with the variant first.
# Keep rule: tests PASS, sanitizers clean, KDA 1x32768 faster in both rounds -> make 32 the default
# where planned (gdn_fused_wgp.cu gdn_fused_wgp_vs: `!= "64"` instead of `== "32"`).
KC=LINATTN_CUDA_WGP_VS
kc_t0=$(date +%s)
kc_left() { local a=$(( 90 - ($(date +%s) - kc_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
kc_hung=0
kc_test() {  # kc_test CAP BINARY FILTER: the binary with the switch exported, under the piece's own cap
  local c=$1 t=$2 f=$3 rc
  [ $kc_hung = 0 ] || { say "kdachain: $t skipped (an earlier run was cut)"; return; }
  [ "$(kc_left)" -gt $(( c + 5 )) ] || { say "kdachain: $t skipped (no time)"; return; }
  echo "### $t with $KC=32 (filter $f)" >>"$OUT/ab-tests.txt"
  env $KC=32 timeout "$(cap "$c")" stdbuf -oL -eL "$BIN/$t" --gtest_brief=1 --gtest_filter="$f" >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then echo "PASS $t with $KC=32" | tee -a "$LOG"
  elif [ $rc -eq 124 ]; then status=1; kc_hung=1; echo "FAIL $t with $KC=32 (cut at its ${c} s cap: hang?)" | tee -a "$LOG"
  else status=1; echo "FAIL $t with $KC=32 (exit $rc)" | tee -a "$LOG"; fi
}
kc_san() {  # kc_san TOOL CAP: one sanitized KDA case (varlen edges, -1000 gates) at V-slice 32
  local f='Dtypes/CudaKdaFwd.PipelinedVSlice32/bf16_bt64' rc
  [ $kc_hung = 0 ] || { say "kdachain: $1 skipped (a test was cut)"; return; }
  [ "$(kc_left)" -gt $(( $2 + 3 )) ] && command -v compute-sanitizer >/dev/null 2>&1 ||
    { say "kdachain: $1 skipped (no time or no compute-sanitizer)"; return; }
  echo "### $1 test_cuda_kda_fwd with $KC=32 ($f)" >>"$OUT/ab-tests.txt"
  env $KC=32 LINATTN_SANITIZED=1 timeout "$(cap "$2")" compute-sanitizer --tool "$1" --error-exitcode 99 \
    "$BIN/test_cuda_kda_fwd" --gtest_brief=1 --gtest_filter="$f" >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 124 ] || status=1  # 124: cut by the cap (incomplete, not a finding)
  say "kdachain: $1 exit $rc ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
}
kc_bench() {  # kc_bench OP HQK HV LENGTHS ITERS SWITCH...: one row per switch
  local op=$1 hqk=$2 hv=$3 len=$4 it=$5 sw l
  shift 5
  for sw in "$@"; do
    l=$(kc_left)
    [ "$l" -gt 6 ] || { say "kdachain bench $op $len $sw skipped (piece time spent)"; continue; }
    [ $kc_hung = 0 ] || { say "kdachain bench $op $len $sw skipped (a test was cut: no A/B)"; continue; }
    bench $(( l < 20 ? l : 20 )) "$sw" bench-cuda --op "$op" --hqk "$hqk" --hv "$hv" --lengths "$len" --iters "$it" \
      --check 1 --commit "$COMMIT"
  done
}
kc_test 25 test_cuda_kda_fwd '*PipelinedVSlice32/*:CudaKdaFwdWgmma.*'
kc_test 20 test_cuda_gdn_fwd '*CudaGdnFwdVs32.*/*_tma2:*ChunkedKernelsMatchReference/*_bt64'
kc_test 10 test_cuda_graph 'CudaGraphGdnFwd.*:CudaGraphKdaFwd.*'
kc_san memcheck 10
kc_bench kda 32 32 1x32768 20 none $KC=32
kc_bench kda 32 32 4096x8 10 none $KC=32
kc_bench gdn 16 32 1x4096 20 none $KC=32
kc_bench gdn 16 32 1x32768 20 none $KC=32
kc_bench kda 32 32 1x32768 20 $KC=32 none
kc_san racecheck 10
true

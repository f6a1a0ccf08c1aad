# pdlauto (lead, session 13, issue 5): LINATTN_CUDA_PDL=auto (src/cuda/common/pdl_policy.h): PDL except where the
# whole GDN forward's prep runs more than two waves (nt_cap x H CTAs at 4 per SM), where it launches plainly; tier 3
# and the short forward keep PDL. Compiled, never run on a GPU. Why: the final run at 46d13bb measured PDL ~2% slower
# at 16/64 1x32768 (eager 1.175 -> 1.196 ms) while it helps tier 3 and short batches.
# Prediction: 16/64 1x32768 and 4096x8 eager -20 us (= PDL off), graph -0 to -20 us; short and tier 3 unchanged.
# 1. bench default (PDL on) vs auto interleaved, two rounds: 16/64 1x32768, 16/64 4096x8; then 16/32 1x32768, the
#    short 16/32 128,96,200,88 and tier 3 2/8 once each;
# 2. test_cuda_gdn_fwd CudaGdnFwdPdlSwitch.* (auto: the short chain with PDL, the long one without, bitwise).
# Own clock: PA_SHARE (default 90 s).
pa_t0=$(date +%s)
pa_left() { local a=$(( ${PA_SHARE:-90} - ($(date +%s) - pa_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
pa_bench() {  # pa_bench ENV|none args...
  local e=$1; shift
  [ "$(pa_left)" -gt 25 ] || { say "pdlauto: bench skipped (no time): $e $*"; return; }
  bench 10 "$e" bench-cuda "$@" --commit "$COMMIT"
}
PA_SW=LINATTN_CUDA_PDL=auto
for pa_round in 1 2; do
  for pa_len in 1x32768 4096x8; do
    if [ "$pa_round" = 1 ]; then order="none $PA_SW"; else order="$PA_SW none"; fi
    for e in $order; do pa_bench "$e" --hqk 16 --hv 64 --lengths "$pa_len" --segments 1 --iters 20 --check 0; done
  done
done
for e in none "$PA_SW"; do pa_bench "$e" --hqk 16 --hv 32 --lengths 1x32768 --iters 20 --check 0; done
for e in none "$PA_SW"; do pa_bench "$e" --hqk 16 --hv 32 --lengths 128,96,200,88 --iters 50 --check 1; done
for e in none "$PA_SW"; do pa_bench "$e" --hqk 2 --hv 8 --lengths 1x32768 --segments 0 --iters 30 --check 0; done
if [ "$(pa_left)" -gt 12 ]; then
  echo "### test_cuda_gdn_fwd CudaGdnFwdPdlSwitch.*" >>"$OUT/ab-tests.txt"
  timeout "$(cap $(( $(pa_left) - 2 )))" stdbuf -oL -eL "$BIN/test_cuda_gdn_fwd" --gtest_brief=1 \
    --gtest_filter='CudaGdnFwdPdlSwitch.*' >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then say "PASS test_cuda_gdn_fwd CudaGdnFwdPdlSwitch.*"
  else status=1; say "FAIL test_cuda_gdn_fwd CudaGdnFwdPdlSwitch.* (exit $rc; 124 = the cap)"; fi
else
  say "pdlauto: tests skipped (no time)"
fi
true

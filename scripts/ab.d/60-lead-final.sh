# Lead, session 10: the headline configs with the defaults flipped at accc55a's A/B (GDN prep v6, chain tma3,
# V-slice 32 where planned, KDA prep v9), graph replay rows of the default only; then the wg6 chunk kernel's
# tests with a longer cap (the gdnbwd8 piece cut them at 30 s) and, if they pass, its A/B rows.
lf_t0=$(date +%s)
lf_left() { local a=$(( ${LF_SHARE:-300} - ($(date +%s) - lf_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
lf_bench() {  # lf_bench SWITCH linattn-args...
  local sw=$1 l
  shift
  l=$(lf_left)
  [ "$l" -gt 8 ] || { say "lead-final bench $sw $* skipped (no time)"; return; }
  bench $(( l < 25 ? l : 25 )) "$sw" "$@" --commit "$COMMIT"
}
for len in 1x32768 4096x8 1x2048; do lf_bench none bench-cuda --hqk 16 --hv 64 --lengths $len --segments 1 --iters 20 --check 1; done
lf_bench none bench-cuda --hqk 16 --hv 32 --lengths 1x32768 --iters 20 --check 1
lf_bench none bench-cuda --hqk 2 --hv 8 --lengths 1x32768 --segments 0 --iters 30 --check 0
for len in 1x32768 4096x8; do lf_bench none bench-cuda --op kda --hqk 32 --hv 32 --lengths $len --iters 20 --check 1; done
lf_bench none bench-cuda-bwd --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1
lf_bench none bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1
if [ "$(lf_left)" -gt 100 ]; then
  echo "### test_cuda_gdn_bwd with LINATTN_CUDA_GDN_BWD_CHUNK=wg6 (90 s cap)" >>"$OUT/ab-tests.txt"
  LINATTN_CUDA_GDN_BWD_CHUNK=wg6 timeout "$(cap 90)" stdbuf -oL -eL "$BIN/test_cuda_gdn_bwd" --gtest_brief=1 \
    --gtest_filter='Dtypes/CudaGdnBwd.ChunkedMatchesReference/bf16_bt64:Dtypes/CudaGdnBwd.Wg6*/*_bt64:CudaGdnBwdWg6.*' \
    >>"$OUT/ab-tests.txt" 2>&1
  lf_rc=$?
  say "lead-final: test_cuda_gdn_bwd with wg6 exit $lf_rc (124 = the 90 s cap)"
  if [ $lf_rc -eq 0 ]; then
    lf_bench none bench-cuda-bwd --hqk 16 --hv 32 --lengths 1x32768 --iters 10
    lf_bench LINATTN_CUDA_GDN_BWD_CHUNK=wg6 bench-cuda-bwd --hqk 16 --hv 32 --lengths 1x32768 --iters 10
  else
    status=1
  fi
else
  say "lead-final: wg6 tests skipped (no time)"
fi
true

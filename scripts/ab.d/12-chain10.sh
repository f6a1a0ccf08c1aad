# GDN forward, chain modes tma5 (LINATTN_CUDA_GDN_CHAIN=tma5 = tma3+fan+ost) and tma6 (tma5+split); src/cuda/gdn/gdn_fused_wgp_chain.cuh,
# gdn_fused_wgp_common.cuh, gdn_fused_wgp_tma.cuh; perf-notes "State chain: the refill fan-out (chain10)").
# fan: both TMA rings' refills fanned out over their warpgroup's four warps (one copy or two per warp's lane 0; WG0's
# in the Ab X wait) instead of five / four copies on thread 0, WG1 frees a hand-off buffer once its fragments are in
# registers, no top-of-chunk proxy fences on full chunks; ost (gdnchain9): WG1's full output chunks by one TMA store.
# Why (ncu 678f770, the tma3 chain at 16/64 1x32768): warp 0's refill issue is ~440 cycles of WG0's ~2550-cycle step
# (WG1: ~320) and the other three warps wait for it at the next barrier: WG0's "empty" wait and WG1's "full" wait
# are mostly those. Same products: bitwise == tma3 (the tests assert it). Compiled here, never run on a GPU.
# Prediction (eager p50, --segments 1): 16/64 1x32768 -6 to -10% (chain ~661 -> ~560-600 us), 4096x8 -5 to -9%,
# 1x2048 -3 to -6%; tma3+fan alone about half of that (WG1 then bounds the step at ~2.3 k cycles); tma6 a further
# 0 to -5% (the update's wait at the step's end overlapped with the next K S^T, tma4's split, now that the refill is off).
# 1. bench default vs tma5 interleaved, two rounds (16/64 1x32768, 4096x8), 1x2048 once, then tma6 at 1x32768 and
#    4096x8 and tma3+fan at 1x32768 (each while >= 30 s of the piece are left, kept for the tests);
# 2. test_cuda_gdn_fwd's tma5 chain cases (fp64 reference, bitwise == v3 and the default, the instance ran; the
#    switch / workspace tests), test_cuda_graph's GDN tests with tma5 forced (replay == eager fixed), then the
#    tma6 and tma3+fan chain cases.
# Own clock: C10_SHARE (default 90 s).
c10_t0=$(date +%s)
c10_left() { local a=$(( ${C10_SHARE:-90} - ($(date +%s) - c10_t0) )) b; b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
c10_bench() {  # c10_bench ENV|none args...
  local e=$1; shift
  [ "$(c10_left)" -gt 30 ] || { say "chain10: bench skipped (no time): $e $*"; return; }
  bench 10 "$e" bench-cuda "$@" --commit "$COMMIT"
}
c10_test() {  # c10_test CAP ENV|none BINARY FILTER
  local c=$1 e=$2 t=$3 f=$4 rc
  [ "$(c10_left)" -gt $(( c + 2 )) ] || { say "chain10: $t ($f) skipped (no time)"; return; }
  echo "### $t (filter $f) with ${e/#none/the switches the tests set}" >>"$OUT/ab-tests.txt"
  timeout "$(cap "$c")" env ${e/#none/} stdbuf -oL -eL "$BIN/$t" --gtest_brief=1 --gtest_filter="$f" \
    >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then say "PASS $t ($f) chain10"
  else status=1; say "FAIL $t ($f) chain10 (exit $rc; 124 = the ${c} s cap)"; fi
}
C10=LINATTN_CUDA_GDN_CHAIN=tma5
for c10_round in 1 2; do
  for c10_len in 1x32768 4096x8; do
    if [ "$c10_round" = 1 ]; then c10_order="none $C10"; else c10_order="$C10 none"; fi
    for e in $c10_order; do c10_bench "$e" --hqk 16 --hv 64 --lengths "$c10_len" --segments 1 --iters 20 --check 0; done
  done
done
for e in none "$C10"; do c10_bench "$e" --hqk 16 --hv 64 --lengths 1x2048 --segments 1 --iters 20 --check 0; done
for c10_len in 1x32768 4096x8; do
  c10_bench LINATTN_CUDA_GDN_CHAIN=tma6 --hqk 16 --hv 64 --lengths "$c10_len" --segments 1 --iters 20 --check 0
done
c10_bench LINATTN_CUDA_GDN_CHAIN=tma3+fan --hqk 16 --hv 64 --lengths 1x32768 --segments 1 --iters 20 --check 0
c10_test 15 none test_cuda_gdn_fwd 'DtypesAndModes/CudaGdnFwdChain.*tma5:CudaGdnFwdChainTma3.*:CudaGdnFwdChainSwitch.*'
# the pipelined kernel at V-slice 64 everywhere, so the graph tests' small shapes take tma5 too
c10_test 8 "$C10 LINATTN_CUDA_WGMMA=1 LINATTN_CUDA_WGP_VS=64" test_cuda_graph 'CudaGraphGdn*'
c10_test 12 none test_cuda_gdn_fwd 'DtypesAndModes/CudaGdnFwdChain.*tma6'
c10_test 12 none test_cuda_gdn_fwd 'DtypesAndModes/CudaGdnFwdChain.*tma3_fan'
# racecheck of the tma5 chain cases (WG1's early hand-off release), only if the piece has time left; 124 = cut by its cap
if [ "$(c10_left)" -gt 20 ] && command -v compute-sanitizer >/dev/null 2>&1; then
  c10_rc='DtypesAndModes/CudaGdnFwdChain.MatchesReference/bf16_tma5'
  echo "### racecheck $c10_rc" >>"$OUT/ab-tests.txt"
  LINATTN_SANITIZED=1 timeout "$(cap $(( $(c10_left) - 3 )))" compute-sanitizer --tool racecheck --error-exitcode 99 \
    "$BIN/test_cuda_gdn_fwd" --gtest_filter="$c10_rc" >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && status=1
  say "chain10 racecheck: exit $rc (124 = cut by its cap) ($(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
fi
true

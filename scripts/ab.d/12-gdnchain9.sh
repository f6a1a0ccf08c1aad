# GDN forward, chain mode tma4 (LINATTN_CUDA_GDN_CHAIN=tma4 = tma3+split+ost; src/cuda/gdn/gdn_fused_wgp.cu,
# gdn_fused_wgp_common.cuh, gdn_fused_wgp_tma.cuh; perf-notes "State chain: both warpgroups' step (gdnchain9)"):
# split: WG0 issues the state update as two key halves at the top of the next chunk, so the packs of S and K S^T's
# first half run while the update's second half is in the tensor pipe; ost: WG1's full output chunks leave a swizzled
# staging box by one TMA store (the 082dba2 profile: WG1's store phase is 34% of its samples, and WG0 waits 17% of its samples at the
# hand-off's empty barrier for WG1). Same products: expected bitwise == tma3 / v3. Compiled here, never run on a GPU
# before this piece. Prediction: 16/64 1x32768 graph 1.263 -> ~1.15-1.21 ms.
# 1. test_cuda_gdn_fwd's tma4 chain cases (bf16 / fp16: fp64 reference incl. varlen partial chunks, 1-7 chunks,
#    h0 / ht both layouts, GVA; bitwise == v3 and == the default tma3; the instance ran), the switch and
#    workspace tests; then with tma4 forced: the GDN graph tests, the tier-3 GDN forward tests; no bench if the
#    chain tests fail or time out; after the bench, if time is left: the tma3+split / tma3+ost chain cases and
#    rows (which half of tma4 pays), memcheck of one case;
# 2. bench default vs tma4 interleaved (16/64 1x32768 / 4096x8 / 1x2048, 16/32 1x32768 --segments 0 (planned V-slice 32:
#    its own kernel, equal rows; unless tier 3 plans an output pass at V-slice 64, which takes tma4), KDA 32/32 1x32768 (KDA does not take tma4: equal rows)), two rounds;
# 3. (diagnostic for the 4096x8 gap, default only, between the two rounds) 16/64 8192x4 and 2048x16: the fused
#    kernel runs ceil(CTAs / 132) rounds of (its chunk steps + a fixed per-CTA start / drain); 1x32768 1 round of 512
#    steps, 8192x4 4 of 128, 4096x8 8 of 64, 2048x16 16 of 32: the same chunk steps, so the forward should grow
#    linearly in rounds by ~11.6 us a round (ncu at d3f84ad: fused 747 us at 4096x8 vs 666 at 1x32768, prep equal):
#    predicted graph ~1.30 ms (8192x4) and ~1.44 ms (2048x16).
# Own 90 s.
c9sw=LINATTN_CUDA_GDN_CHAIN
c9ok=0
c9end=$(( $(date +%s) + 90 ))
c9left() { local m=$(( c9end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
c9test() {  # c9test CAP BINARY FILTER: with tma4 (and the pipelined kernel everywhere) forced
  [ "$(c9left)" -gt $(( $1 + 35 )) ] || { say "gdnchain9: $2 skipped (no time)"; return; }
  echo "### $2 ($3) with $c9sw=tma4 LINATTN_CUDA_WGMMA=1" >>"$OUT/ab-tests.txt"
  env $c9sw=tma4 LINATTN_CUDA_WGMMA=1 timeout "$(cap "$1")" stdbuf -oL -eL "$BIN/$2" --gtest_brief=1 \
    --gtest_filter="$3" >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then say "PASS $2 ($3) with $c9sw=tma4"; else status=1; say "FAIL $2 ($3) with $c9sw=tma4 (exit $rc)"; fi
}
if [ "$(c9left)" -gt 60 ]; then
  c9f='DtypesAndModes/CudaGdnFwdChain.*tma4:CudaGdnFwdChainTma3.*'
  echo "### test_cuda_gdn_fwd (filter $c9f; the tests set $c9sw themselves)" >>"$OUT/ab-tests.txt"
  timeout "$(cap 20)" stdbuf -oL -eL "$BIN/test_cuda_gdn_fwd" --gtest_brief=1 --gtest_filter="$c9f" >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    c9ok=1; say "PASS test_cuda_gdn_fwd tma4 chain cases"
  else
    status=1; say "FAIL test_cuda_gdn_fwd tma4 chain cases (exit $rc; 124 = the 20 s cap): no bench of tma4"
  fi
  if [ $c9ok = 1 ]; then
    c9test 8 test_cuda_graph 'CudaGraphGdn*'
    c9test 6 test_cuda_tier3 'Dtypes/CudaTier3Fwd.GdnMatchesReferenceAndTier1/*'
  fi
else
  say "gdnchain9 tests skipped (no time)"
fi
if [ $c9ok = 1 ]; then  # interleaved; each row while the piece has >= 6 s left
  c9v=$c9sw=tma4
  for c9row in "1x32768 $c9v 1" "1x32768 none 1" "4096x8 $c9v 1" "4096x8 none 1" "1x2048 $c9v 1" "1x2048 none 1" \
               "h32 none 0" "h32 $c9v 0" "kda none 0" "kda $c9v 0" "8192x4 none 0" "2048x16 none 0" \
               "1x32768 none 0" "1x32768 $c9v 0" "4096x8 none 0" "4096x8 $c9v 0" "1x2048 none 0" "1x2048 $c9v 0" \
               "h32 $c9v 0" "h32 none 0" "kda $c9v 0" "kda none 0"; do
    set -- $c9row
    [ "$(c9left)" -gt 6 ] || { say "gdnchain9 bench $c9row skipped (piece time spent)"; continue; }
    c9c=$(( $(c9left) < 12 ? $(c9left) : 12 ))
    case "$1" in
      h32) bench $c9c "$2" bench-cuda --hqk 16 --hv 32 --lengths 1x32768 --segments 0 --iters 20 --check 0 --commit "$COMMIT" ;;
      kda) bench $c9c "$2" bench-cuda --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 20 --check 0 --commit "$COMMIT" ;;
      *) bench $c9c "$2" bench-cuda --hqk 16 --hv 64 --lengths "$1" --iters 20 --check "$3" --commit "$COMMIT" ;;
    esac
  done
fi
if [ $c9ok = 1 ] && [ "$(c9left)" -gt 30 ]; then  # which half pays: the split / ost chain cases, then their rows
  c9f='DtypesAndModes/CudaGdnFwdChain.*tma3_split:DtypesAndModes/CudaGdnFwdChain.*tma3_ost'
  echo "### test_cuda_gdn_fwd (filter $c9f)" >>"$OUT/ab-tests.txt"
  timeout "$(cap 15)" stdbuf -oL -eL "$BIN/test_cuda_gdn_fwd" --gtest_brief=1 --gtest_filter="$c9f" >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    say "PASS test_cuda_gdn_fwd tma3+split / tma3+ost chain cases"
    for c9v in "$c9sw=tma3+ost" "$c9sw=tma3+split"; do
      [ "$(c9left)" -gt 6 ] || continue
      bench $(( $(c9left) < 12 ? $(c9left) : 12 )) "$c9v" bench-cuda --hqk 16 --hv 64 --lengths 1x32768 --iters 20 --check 0 \
        --commit "$COMMIT"
    done
  else
    status=1; say "FAIL test_cuda_gdn_fwd tma3+split / tma3+ost chain cases (exit $rc; 124 = the 15 s cap)"
  fi
fi
if [ $c9ok = 1 ] && [ "$(c9left)" -gt 14 ] && command -v compute-sanitizer >/dev/null 2>&1; then
  c9mc='DtypesAndModes/CudaGdnFwdChain.MatchesReference/bf16_tma4'
  echo "### memcheck $c9mc" >>"$OUT/ab-tests.txt"
  LINATTN_SANITIZED=1 timeout "$(cap 10)" compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$BIN/test_cuda_gdn_fwd" --gtest_filter="$c9mc" >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && status=1
  say "gdnchain9 memcheck: exit $rc (124 = cut by its cap) ($(grep -E 'ERROR SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
fi
true

# GDN prep v7 (LINATTN_CUDA_GDN_PREP=v7; src/cuda/gdn/gdn_prep_v7.cu, gdn_prep_parts.cuh, gdn_prep_v7.h; perf-notes
# "Prep v7"): v6's front half, then per value head one pass forming each decay once for L and P over the lower
# segments only (warp-uniform roles), packed L / X / Q K^T, the diagonal solve beside the L build (2 CTA barriers per
# head, v6 3). Bitwise v6's o / state / gradients (P differs only in the sign of upper zeros). Compiled here, never
# run on a GPU before this piece. Prediction: prep ~0.60 -> ~0.43-0.50 ms, forward 16/64 1x32768 graph
# 1.263 -> ~1.10-1.17 ms, 4096x8 1.345 -> ~1.20-1.25, 1x2048 0.109 -> ~0.100-0.104, tier 3 2/8 0.338 -> ~0.325-0.33.
# 1. test_cuda_gdn_prep (the tests set the switch: the V7* cases = fp64 bars, bitwise == v6 incl. V-slices,
#    P fused, tma3 records, backward, training cache; 4 CTAs per SM); with v7 forced: the GDN graph tests and the
#    tier-3 GDN tests. No bench on a FAIL of test_cuda_gdn_prep.
# 2. bench default vs v7 interleaved, two rounds (16/64 1x32768, 4096x8, 1x2048; 2/8 1x32768 --segments 0; --check 1:
#    rel_rms_err vs the recurrent kernel). Rows into bench.jsonl with env_switch.
# 3. with the time left: the training-cache replay test with v7 forced, memcheck of one v7 case. Own 90 s.
g7sw=LINATTN_CUDA_GDN_PREP
g7ok=0
g7end=$(( $(date +%s) + 90 ))
g7left() { local m=$(( g7end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
g7test() {  # g7test CAP BINARY FILTER: with v7 forced
  [ "$(g7left)" -gt $(( $1 + 4 )) ] || { say "gdnprep7: $2 skipped (no time)"; return; }
  echo "### $2 ($3) with $g7sw=v7" >>"$OUT/ab-tests.txt"
  env $g7sw=v7 timeout "$(cap "$1")" stdbuf -oL -eL "$BIN/$2" --gtest_brief=1 --gtest_filter="$3" >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then say "PASS $2 ($3) with $g7sw=v7"; else status=1; say "FAIL $2 ($3) with $g7sw=v7 (exit $rc)"; fi
}
if [ "$(g7left)" -gt 60 ] && [ -x "$BIN/test_cuda_gdn_prep" ]; then
  echo "### test_cuda_gdn_prep V7 cases (the tests set $g7sw themselves)" >>"$OUT/ab-tests.txt"
  timeout "$(cap 28)" stdbuf -oL -eL "$BIN/test_cuda_gdn_prep" --gtest_brief=1 --gtest_filter='*V7*' \
    >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    g7ok=1; say "PASS test_cuda_gdn_prep *V7*"
  else
    status=1; say "FAIL test_cuda_gdn_prep *V7* (exit $rc; 124 = the 28 s cap): no bench of v7"
  fi
  if [ $g7ok = 1 ]; then
    g7test 5 test_cuda_graph 'CudaGraphGdn*'
    g7test 6 test_cuda_tier3 '*Gdn*'
  fi
else
  say "gdnprep7 tests skipped (no time or no test_cuda_gdn_prep binary)"
fi
if [ $g7ok = 1 ]; then  # interleaved, two rounds (the second variant-first); each while the piece has >= 4 s left
  g7v=$g7sw=v7
  for g7row in "16 64 1x32768 1 none" "16 64 1x32768 1 $g7v" "16 64 4096x8 1 none" "16 64 4096x8 1 $g7v" \
               "16 64 1x2048 1 none" "16 64 1x2048 1 $g7v" "2 8 1x32768 0 none" "2 8 1x32768 0 $g7v" \
               "16 64 1x32768 1 $g7v" "16 64 1x32768 1 none" "16 64 4096x8 1 $g7v" "16 64 4096x8 1 none" \
               "16 64 1x2048 1 $g7v" "16 64 1x2048 1 none" "2 8 1x32768 0 $g7v" "2 8 1x32768 0 none"; do
    set -- $g7row
    [ "$(g7left)" -gt 4 ] || { say "gdnprep7 bench $g7row skipped (piece time spent)"; continue; }
    g7c=$(( $(g7left) < 12 ? $(g7left) : 12 ))
    bench $g7c "$5" bench-cuda --hqk "$1" --hv "$2" --lengths "$3" --segments "$4" --iters 20 --check 1 \
      --commit "$COMMIT"
  done
  g7test 6 test_cuda_graph_bwd 'CudaGraphFwdBwd.TrainingCacheReplayEqualsEagerWithoutCache'
  if [ "$(g7left)" -gt 14 ] && command -v compute-sanitizer >/dev/null 2>&1; then
    g7mc='Dtypes/CudaGdnPrepV6.V7SameBitsAsV6/bf16_bt64'
    echo "### memcheck $g7mc" >>"$OUT/ab-tests.txt"
    LINATTN_SANITIZED=1 timeout "$(cap 10)" compute-sanitizer --tool memcheck --error-exitcode 99 \
      "$BIN/test_cuda_gdn_prep" --gtest_filter="$g7mc" >>"$OUT/ab-tests.txt" 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && status=1
    say "gdnprep7 memcheck: exit $rc (124 = cut by its cap) ($(grep -E 'ERROR SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
  fi
fi
true

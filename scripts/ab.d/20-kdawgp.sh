# scripts/ab.d/20-kdawgp.sh: KDA forward through the pipelined wgmma kernel's KDA gate policy
# (src/cuda/gdn/gdn_fused_wgp.cu, opt-in LINATTN_CUDA_KDA_WGMMA=1) vs the default mma.sync fused
# kernel (gdn_fused.cu). Sourced by scripts/gpu-final's ab step (BIN, LA, OUT, COMMIT, ab_test,
# bench, cap, left, say, status). ~90 s:
#   tests with the policy forced: test_cuda_kda_fwd (chunked cases, extreme gates, the policy's own
#   launch checks; the token-kernel cases do not touch it), test_cuda_tier3 (KDA), test_layer_cuda
#   (KDA layers), test_cuda_gdn_fused_wg (GDN: unaffected by the KDA switch);
#   bench: 32/32 KDA forward at 1x32768, 1x4096, 4096x8, default then forced per config
#   (interleaved), --check 1 (rel vs the token kernel) on the forced rows.
# Decide: forced faster at 1x32768 and 4096x8 with every test passing -> flip the KDA default in
# gdn_fused_wg_kda_enabled() (gdn_fused_wg.cu) and delete this file.
kdawgp_sw=LINATTN_CUDA_KDA_WGMMA=1
say "A/B kdawgp: KDA forward, default (mma.sync fused) vs $kdawgp_sw (pipelined wgmma KDA policy)"
if [ "$(left)" -gt 60 ]; then
  ab_test "$kdawgp_sw" test_cuda_kda_fwd '-*TokenKernel*'
  ab_test "$kdawgp_sw" test_cuda_tier3 '*Kda*'
  ab_test "$kdawgp_sw" test_layer_cuda '*Kda*'
  ab_test "$kdawgp_sw" test_cuda_gdn_fused_wg
else
  say "A/B kdawgp: tests skipped (no time)"
fi
for kdawgp_len in 1x32768 4096x8 1x4096; do
  [ "$(left)" -gt 30 ] || { say "A/B kdawgp: bench cut before $kdawgp_len"; break; }
  bench 20 none bench-cuda --op kda --hqk 32 --hv 32 --lengths "$kdawgp_len" --iters 20 --check 0 --commit "$COMMIT"
  bench 25 "$kdawgp_sw" bench-cuda --op kda --hqk 32 --hv 32 --lengths "$kdawgp_len" --iters 20 --check 1 --commit "$COMMIT"
done
# memcheck + racecheck of the KDA policy on the bf16 BT 64 cases (small shapes under LINATTN_SANITIZED)
for kdawgp_tool in memcheck racecheck; do
  [ "$(left)" -gt 45 ] || { say "A/B kdawgp: $kdawgp_tool skipped (no time)"; continue; }
  echo "### compute-sanitizer $kdawgp_tool, test_cuda_kda_fwd with $kdawgp_sw" >>"$OUT/ab-tests.txt"
  if env "$kdawgp_sw" LINATTN_SANITIZED=1 timeout "$(cap 40)" compute-sanitizer --tool "$kdawgp_tool" --error-exitcode 99 \
      "$BIN/test_cuda_kda_fwd" --gtest_filter='Dtypes/CudaKdaFwd.ChunkedPipelinedWgmmaPolicy/bf16_bt64' >>"$OUT/ab-tests.txt" 2>&1; then
    say "A/B kdawgp: $kdawgp_tool clean"
  else
    status=1; say "A/B kdawgp: $kdawgp_tool FAILED or cut"
  fi
done

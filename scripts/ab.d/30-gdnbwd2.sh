# A/B piece (sourced by scripts/gpu-final's ab step): the GDN backward chunk kernel "wg2"
# (LINATTN_CUDA_GDN_BWD_CHUNK=wg2: descriptors built once per product + one add per k-step, per-thread
# swizzle offsets, hoisted cp.async offsets, warp 0's finish without global loads and without the
# barrier after it) against the default wgmma kernel. ~90 s: the GDN backward tests with wg2 forced,
# a racecheck of one chunked case (wg2 dropped a barrier), then default vs wg2 interleaved per config.
sw=LINATTN_CUDA_GDN_BWD_CHUNK=wg2
ab_test "$sw" test_cuda_gdn_bwd
ab_test "$sw" test_cuda_graph_bwd 'CudaGraphGdn*'
ab_test "$sw" test_cuda_tier3_bwd '*Gdn*'
if [ "$(left)" -gt 150 ] && command -v compute-sanitizer >/dev/null; then
  echo "### racecheck test_cuda_gdn_bwd bf16_bt64 with $sw" >>"$OUT/ab-tests.txt"
  env "$sw" LINATTN_SANITIZED=1 timeout "$(cap 40)" compute-sanitizer --tool racecheck --error-exitcode 99 \
    "$BIN/test_cuda_gdn_bwd" --gtest_brief=1 --gtest_filter='Dtypes/CudaGdnBwd.ChunkedMatchesReference/bf16_bt64' \
    >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  case $rc in
    0) say "PASS racecheck test_cuda_gdn_bwd with $sw" ;;
    124 | 137) say "racecheck with $sw cut by its time cap (no verdict)" ;;
    *) status=1; say "FAIL racecheck test_cuda_gdn_bwd with $sw (exit $rc)" ;;
  esac
fi
for len in 1x32768 1x8192 512x16; do
  for v in none "$sw"; do
    bench 20 "$v" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths "$len" --iters 5 --commit "$COMMIT"
  done
done

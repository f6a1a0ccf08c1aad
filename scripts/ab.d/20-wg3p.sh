# Lead, session 12: the GDN backward sweeps wg3p / wg3pf (session 11, built, never benched) vs the default wg3.
# The deciding bench rows first (interleaved, two rounds), then the bitwise tests. Own share ~110 s.
wp_t0=$(date +%s)
wp_left() { local a=$(( 110 - ($(date +%s) - wp_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
for round in 1 2; do
  for sw in none LINATTN_CUDA_GDN_BWD_SWEEP=wg3p LINATTN_CUDA_GDN_BWD_SWEEP=wg3pf; do
    [ "$(wp_left)" -gt 25 ] || { say "wg3p: bench $sw round $round skipped (no time)"; continue; }
    bench 14 "$sw" bench-cuda-bwd --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
  done
done
if [ "$(wp_left)" -gt 25 ]; then
  ab_test LINATTN_CUDA_GDN_BWD_SWEEP=wg3pf test_cuda_gdn_bwd 'Dtypes/CudaGdnBwd.SweepWg3p*:Dtypes/CudaGdnBwd.ChunkedMatchesReference/*'
fi
true

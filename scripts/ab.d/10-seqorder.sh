# Longest-first sequence order of the head-level GDN / KDA forward kernel (LINATTN_CUDA_SEQ_ORDER=1,
# GdnChunkWs::seq_order built by build_chunk_meta): the varlen tests with the order forced, then
# default vs order on mixed-length batches where the grid needs more than one wave; the backward
# sweeps read the same order (GdnChunkWs::seq_order), so the backward tests and a varlen backward too.
SW=LINATTN_CUDA_SEQ_ORDER=1
[ "$(left)" -gt 60 ] && ab_test $SW test_cuda_gdn_fwd
[ "$(left)" -gt 60 ] && ab_test $SW test_cuda_kda_fwd
[ "$(left)" -gt 60 ] && ab_test $SW test_cuda_graph
[ "$(left)" -gt 60 ] && ab_test $SW test_cuda_gdn_bwd
[ "$(left)" -gt 60 ] && ab_test $SW test_cuda_graph_bwd
for round in 1 2; do
  for e in none $SW; do
    [ "$(left)" -gt 30 ] || break
    bench 20 $e bench-cuda --op gdn --hqk 16 --hv 32 --lengths 128,96,200,88 --iters 50 --check 0
    bench 20 $e bench-cuda --op gdn --hqk 16 --hv 64 --lengths 300,2000,700,40,1200,64,900,100 --iters 30 --check 0
    bench 20 $e bench-cuda --op kda --hqk 32 --hv 32 --lengths 128,96,200,88,1000,30 --iters 30 --check 0
    bench 20 $e bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 128,96,200,88,1000,30 --iters 20 --check-max-tokens 0
  done
done

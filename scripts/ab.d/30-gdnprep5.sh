# GDN forward prep v5 (LINATTN_CUDA_GDN_PREP=v5; src/cuda/gdn/gdn_prep.cu, instance PE): every value head's
# P rows are written right after the Gram products with Q K^T kept in the shared union, so the prep takes
# ~65 KB instead of ~82 KB (3 CTAs per SM instead of 2) and stays bitwise the default (perf-notes, GDN
# forward, "P formed in the fused kernel", Next (a); prediction there: prep 777 -> 620-700 us, forward
# 16/64 1x32768 1.665 -> 1.56-1.63 ms). Tests with v5 forced: test_cuda_gdn_fwd (incl. its bitwise
# test PrepV5SameBitsAsDefault, which sets the switch itself), test_cuda_gdn_bwd (bf16 BT 64 cases:
# the backward runs the same prep), test_cuda_graph; bench default vs v5 interleaved, two rounds at
# 16/64 1x32768 and 4096x8, one at 1x2048 and 16/32 1x4096. About 40-70 s of device time.
if [ "$(left)" -gt 60 ]; then
  ab_test LINATTN_CUDA_GDN_PREP=v5 test_cuda_gdn_fwd
  ab_test LINATTN_CUDA_GDN_PREP=v5 test_cuda_gdn_bwd '*bf16_bt64*'
  ab_test LINATTN_CUDA_GDN_PREP=v5 test_cuda_graph 'CudaGraphGdn*'
  for cfg in "16 64 1x32768" "16 64 4096x8" "16 64 1x32768" "16 64 4096x8" "16 64 1x2048" "16 32 1x4096"; do
    set -- $cfg
    for sw in none LINATTN_CUDA_GDN_PREP=v5; do
      bench 20 "$sw" bench-cuda --hqk "$1" --hv "$2" --lengths "$3" --iters 20 --check 0 --commit "$COMMIT"
    done
  done
else
  say "gdnprep5 skipped (no time)"
fi

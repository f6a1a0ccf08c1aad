# scripts/ab.d/10-cublaslt.sh: the layers' GEMMs through cublasLt with one algorithm per class and
# size bucket (src/cuda/dense/dense_lt.cc, the default) vs cublasGemmEx per exact shape
# (LINATTN_CUDA_GEMM=gemmex). Sourced by scripts/gpu-final's ab step. ~70 s:
#   test_dense_cuda and test_layer_cuda with gemmex (the fallback path; the tests step runs them
#   with the default), then layer-demo --backend cuda both ways (eager-live = a new layout and new
#   tensors every call: the case the buckets are for; eager-live-again = the same call repeated).
# Decide: eager-live close to eager-live-again with cublasLt, every test passing -> keep it the
# default and delete this file; else LINATTN_CUDA_GEMM's default back to gemmex.
cublaslt_sw=LINATTN_CUDA_GEMM=gemmex
ab_test "$cublaslt_sw" test_dense_cuda
ab_test "$cublaslt_sw" test_layer_cuda
for cublaslt_mode in none "$cublaslt_sw"; do
  [ "$(left)" -gt 40 ] || { say "A/B cublaslt: layer-demo ($cublaslt_mode) skipped (no time)"; continue; }
  say "A/B cublaslt: layer-demo --backend cuda ($cublaslt_mode)"
  echo "===== layer-demo, $cublaslt_mode =====" >>"$OUT/ab-tests.txt"
  env ${cublaslt_mode/#none/} CUDA_VISIBLE_DEVICES=0 timeout "$(cap 45)" "$LA" layer-demo --backend cuda --batches 24 \
    >/tmp/ab-cublaslt.txt 2>&1 || { status=1; say "layer-demo ($cublaslt_mode) FAILED or cut"; }
  grep -v "  batch " /tmp/ab-cublaslt.txt | tee -a "$LOG" >>"$OUT/ab-tests.txt"
done

# copybatch (lead, session 17, issue 5): copy_tensors (dense.h), the graph inputs' staging in one kernel launch
# (src/cuda/dense/copy_batch.cu); bench's update() now stages q / k / v / g / beta (+ dO) and cu_seqlens by one
# copy_tensors call, LINATTN_BENCH_UPDATE=copies keeps the old six copy_tensor calls (cudaMemcpyAsync each).
# Prediction: the update alone (bench's update_us) 20 -> ~6 us at GDN 16/32 128,96,200,88; graph-update-replay
# 70.7 -> ~57 us (replay unchanged 48.4); update nodes 6 -> 1.
# 1. test_dense_cuda's copy_tensors test (eager + graph replay, 21 pairs, byte path, host pair);
# 2. interleaved benches, two rounds: short prefill GDN 16/32, KDA 32/32 over the same lengths, GDN fwd+bwd 16/32 512.
ab_test LINATTN_BENCH_UPDATE=batched test_dense_cuda 'DenseCuda.CopyTensors*'
for cb_round in 1 2; do
  for cb_sw in none LINATTN_BENCH_UPDATE=copies; do
    [ "$(left)" -gt 40 ] || { say "copybatch: bench skipped (no time)"; break 2; }
    bench 10 "$cb_sw" bench-cuda --hqk 16 --hv 32 --lengths 128,96,200,88 --iters 50 --check 1 --commit "$COMMIT"
    [ "$cb_round" = 1 ] && bench 10 "$cb_sw" bench-cuda --op kda --hqk 16 --hv 32 --lengths 128,96,200,88 --iters 50 \
      --check 0 --commit "$COMMIT"
  done
done
true

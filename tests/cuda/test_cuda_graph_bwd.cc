// GRAPH_CONTRACT.md section 8 for the CUDA GDN / KDA forward + backward: static buffers for one
// capacity, eager warm-up, ONE stream capture of chunk_attn_fwd then chunk_attn_bwd (use_graph =
// true, caller workspaces, caller chunk tables), then seven layouts (dense batch, varlen with a zero-length sequence, zero-length tails,
// actual T << T_max, one sequence filling the bucket, another split, the first again to catch
// stale metadata) copied into the same buffers with NaN garbage in every padding row of every
// token input and of d_o, and NaN in every output and gradient before each replay. Each replay
// must equal the eager fixed-capacity calls bitwise (o, final state, every gradient including the
// zeroed padding rows), match the fp64 reference, and pass d_final_state to dh0 exactly for
// zero-length sequences. The public linattn::Graph runs the same sequence on three layouts. With a
// training cache (forward -> backward, ChunkAttnOutputs::saved) the replays equal the eager calls without one.
// GDN and KDA (gate variants incl. lower_bound), BT 64 and 32, bf16 and fp16, with and without
// h0, fp32 and input-dtype gradients. LINATTN_SANITIZED=1 (compute-sanitizer runs): one config per
// op, 2 layouts x 1 replay, H = 1 / HV = 2.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>

#include "cuda_graph_seq.h"
#include "linattn/graph.h"

namespace linattn::test {
namespace {

void run_public_graph_case(const GraphCase& gc) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    Graph graph(cuda0(), stream);
    const auto all = layouts();
    run_sequence(
        gc, {all[1], all[4], all[5]}, 150, 1, stream, [&](const std::function<void()>& fn) { graph.capture(fn); },
        [&] { graph.replay(); });
    graph.reset();
  }
  cudaStreamDestroy(stream);
}

TEST(CudaGraphGdnFwdBwd, SevenLayoutsReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  std::vector<GraphCase> gcs = {{ChunkOp::kGdn, DType::kBF16, 64, true, true, DType::kF32},
                                {ChunkOp::kGdn, DType::kF16, 64, false, false, DType::kF16},
                                {ChunkOp::kGdn, DType::kBF16, 32, true, false, DType::kBF16},
                                {ChunkOp::kGdn, DType::kF16, 32, true, true, DType::kF32}};
  if (std::getenv("LINATTN_SANITIZED")) gcs.resize(1);
  for (const GraphCase& gc : gcs) run_cuda_graph_case(gc, 7);
}

// The public linattn::Graph on CUDA around the public ops (forward + backward in one graph).
TEST(CudaGraphGdnFwdBwd, PublicGraphApi) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  run_public_graph_case({ChunkOp::kGdn, DType::kBF16, 64, true, true, DType::kBF16});
}

TEST(CudaGraphKdaFwdBwd, SevenLayoutsReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  std::vector<GraphCase> gcs = {{ChunkOp::kKda, DType::kBF16, 64, true, true, DType::kF32, true},
                                {ChunkOp::kKda, DType::kF16, 32, false, false, DType::kF16},
                                {ChunkOp::kKda, DType::kBF16, 32, true, true, DType::kBF16}};
  if (std::getenv("LINATTN_SANITIZED")) gcs.resize(1);
  for (const GraphCase& gc : gcs) run_cuda_graph_case(gc, 7);
}

// The captured forward fills a training cache (ChunkAttnOutputs::saved) that the captured backward reads
// instead of recomputing the prep: every replay still equals the eager calls without a cache bitwise.
TEST(CudaGraphFwdBwd, TrainingCacheReplayEqualsEagerWithoutCache) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  std::vector<GraphCase> gcs = {{ChunkOp::kGdn, DType::kBF16, 64, true, true, DType::kF32, false, 0, true},
                                {ChunkOp::kKda, DType::kBF16, 64, true, true, DType::kBF16, true, 0, true},
                                {ChunkOp::kGdn, DType::kF16, 32, false, false, DType::kF16, false, 0, true}};
  if (std::getenv("LINATTN_SANITIZED")) gcs.resize(1);
  for (const GraphCase& gc : gcs) run_cuda_graph_case(gc, 5);  // the backward has no prep node
}

TEST(CudaGraphKdaFwdBwd, PublicGraphApi) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  run_public_graph_case({ChunkOp::kKda, DType::kBF16, 64, true, true, DType::kBF16, true});
}

}  // namespace
}  // namespace linattn::test

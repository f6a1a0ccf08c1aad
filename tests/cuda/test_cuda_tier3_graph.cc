// GRAPH_CONTRACT.md section 8 for the CUDA tier 3 (cuda/seg/tier3.h), forward + backward captured
// in ONE stream capture with fixed capacity (N_max x segments slots, device-built segment tables):
// eager warm-up on the first layout, capture, then five new layouts (varlen with a zero-length
// sequence, zero-length tails, actual T << T_max, one sequence filling the bucket, another split)
// and the first again, copied into the same buffers with NaN garbage in every padding row of
// every token input and of d_o, NaN in every output and gradient before each replay. Each replay
// must equal the eager fixed-capacity calls bitwise (o, final state, every gradient), match the
// fp64 reference, keep padding gradients zero and pass d_final_state to dh0 exactly for
// zero-length sequences. GDN and KDA, segments 3 and 8, BT 64 and 32, bf16 and fp16.
// (The sequence is cuda_graph_seq.h, shared with test_cuda_graph_bwd.cc for tiers 1 / 2.)
#include <gtest/gtest.h>

#include <cstdlib>

#include "cuda_graph_seq.h"

namespace linattn::test {
namespace {

TEST(CudaTier3Graph, GdnFwdBwdLayoutsReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  std::vector<GraphCase> gcs = {{ChunkOp::kGdn, DType::kBF16, 64, true, true, DType::kF32, false, 3},
                                {ChunkOp::kGdn, DType::kF16, 32, false, false, DType::kF16, false, 8}};
  if (std::getenv("LINATTN_SANITIZED")) gcs.resize(1);
  for (const GraphCase& gc : gcs) run_cuda_graph_case(gc, 10);
}

TEST(CudaTier3Graph, KdaFwdBwdLayoutsReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  std::vector<GraphCase> gcs = {{ChunkOp::kKda, DType::kBF16, 64, true, true, DType::kF32, true, 3},
                                {ChunkOp::kKda, DType::kF16, 32, true, false, DType::kF32, false, 8}};
  if (std::getenv("LINATTN_SANITIZED")) gcs.resize(1);
  for (const GraphCase& gc : gcs) run_cuda_graph_case(gc, 10);
}

}  // namespace
}  // namespace linattn::test

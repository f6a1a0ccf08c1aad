// fp64 reference results for generated GDN / KDA inputs, and the standard comparison of a
// backend's results against them (every present output / gradient, rows of valid tokens only,
// bars from tolerances.h). Every backend's test goes: make_chunk_attn -> run the backend ->
// ref_forward / ref_backward -> EXPECT_TRUE(fwd_close(...)) / EXPECT_TRUE(bwd_close(...)).
#pragma once
#include <gtest/gtest.h>

#include "common/chunk_attn_gen.h"
#include "common/tolerances.h"

namespace linattn::test {

// o and final_state (when opt.output_final_state) in fp64, from src/ref. Padding rows of o stay
// NaN.
ChunkAttnOutTensors ref_forward(const ChunkAttnData& d);
// Every gradient of a present input, in fp64, for the loss sum(o d_o) + sum(ht d_ht).
ChunkAttnGradTensors ref_backward(const ChunkAttnData& d, const ChunkAttnCotangents& c);

// Compares o (valid rows) and final_state. `input` picks the tolerance row (usually q's dtype).
::testing::AssertionResult fwd_close(const ChunkAttnData& d, const ChunkAttnOutTensors& ref,
                                     const ChunkAttnOutTensors& got, DType input);
// Compares every gradient present in `got` (valid rows for the per-token ones).
::testing::AssertionResult bwd_close(const ChunkAttnData& d, const ChunkAttnGradTensors& ref,
                                     const ChunkAttnGradTensors& got, DType input);

}  // namespace linattn::test

// Helpers of the CPU forward tests: run the public op (or the token-recurrent path) on generated
// data with a given thread count, and bitwise comparison of host tensors.
#pragma once
#include <string>

#include "common/chunk_attn_check.h"
#include "common/chunk_attn_gen.h"

namespace linattn::test {

// The pool used by these tests has 4 workers (LINATTN_NUM_THREADS, set before first use), so
// "N threads" really is more than one even on a 2-core machine.
void use_four_pool_threads();

// o in q's dtype, final state fp32.
ChunkAttnOutTensors run_cpu_fwd(const ChunkAttnData& d, int threads, bool token_recurrent = false);
ChunkAttnOutTensors run_cpu_fwd_opt(const ChunkAttnData& d, const ChunkAttnOptions& opt, int threads);

// First differing byte position, or -1.
int64_t first_byte_diff(const Tensor& a, const Tensor& b);
::testing::AssertionResult bitwise_equal(const std::string& name, const Tensor& a, const Tensor& b);

}  // namespace linattn::test

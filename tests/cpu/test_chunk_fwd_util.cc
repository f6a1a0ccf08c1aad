// Helpers of the CPU forward tests (see test_chunk_fwd_util.h).
#include "test_chunk_fwd_util.h"

#include <cstdlib>
#include <cstring>

#include "api/chunk_attn_fwd_cpu.h"
#include "linattn/ops.h"

namespace linattn::test {

void use_four_pool_threads() { setenv("LINATTN_NUM_THREADS", "4", 0); }

ChunkAttnOutTensors run_cpu_fwd_opt(const ChunkAttnData& d, const ChunkAttnOptions& opt, int threads) {
  ChunkAttnOutTensors out = alloc_outputs(d, d.spec.dtype, DType::kF32);
  ExecContext ctx;
  ctx.num_threads = threads;
  chunk_attn_fwd(d.inputs(), out.views(), opt, ctx);
  return out;
}

ChunkAttnOutTensors run_cpu_fwd(const ChunkAttnData& d, int threads, bool token_recurrent) {
  if (!token_recurrent) return run_cpu_fwd_opt(d, d.opt(), threads);
  ChunkAttnOutTensors out = alloc_outputs(d, d.spec.dtype, DType::kF32);
  ExecContext ctx;
  ctx.num_threads = threads;
  api::chunk_attn_fwd_token_recurrent(d.inputs(), out.views(), d.opt(), ctx);
  return out;
}

int64_t first_byte_diff(const Tensor& a, const Tensor& b) {
  const size_t n = a.view().nbytes();
  if (n != b.view().nbytes()) return 0;
  const auto* pa = static_cast<const unsigned char*>(a.view().data);
  const auto* pb = static_cast<const unsigned char*>(b.view().data);
  for (size_t i = 0; i < n; ++i)
    if (pa[i] != pb[i]) return static_cast<int64_t>(i);
  return -1;
}

::testing::AssertionResult bitwise_equal(const std::string& name, const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << name << ": one side absent";
  if (!a.defined()) return ::testing::AssertionSuccess();
  const int64_t i = first_byte_diff(a, b);
  if (i < 0) return ::testing::AssertionSuccess();
  const int64_t e = i / static_cast<int64_t>(dtype_size(a.dtype()));
  return ::testing::AssertionFailure() << name << ": first difference at element " << e << ": "
                                       << a.get(e) << " vs " << b.get(e);
}

}  // namespace linattn::test

// The backward's gate-parameter reduces (the last kernels of the chunked GDN / KDA backward), called directly on
// seeded random per-chunk partials: dA_log [HV] and ddt_bias [HV(, K)] equal the double sums over the first
// `count` rows (count null = every row; a device count below 0 counts as 0, above the rows as the rows: the
// fixed-capacity path's chunk_offsets[N]), fp32 and bf16 outputs, row counts that are not multiples of the row
// groups or the unroll, and two runs are bitwise equal (fixed summation order). The fp64-reference tests of the
// whole backward (test_cuda_kda_bwd_chunked, test_cuda_gdn_bwd) cover the partials' meaning.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <random>
#include <vector>

#include "cuda/gdn/gdn_bwd_kernels.h"
#include "cuda_test_util.h"

namespace linattn::test {
namespace {

// Runs the reduce of width K (1: GDN, 128: KDA) over `rows` random rows with the given device count (null: none),
// checks dA_log and ddt_bias (outputs NaN-prefilled, dtype `out`) against the host's double sums and returns them
// (dA_log then ddt_bias) as doubles.
std::vector<double> run_and_check(int HV, int K, int64_t rows, const int32_t* count_host, DType out, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  Tensor part(DType::kF32, {rows, HV, K, 2}), count(DType::kI32, {1}), dA(out, {HV}), ddt(out, {HV, K});
  for (int64_t i = 0; i < part.numel(); ++i) part.set(i, nd(rng) * 10.f);
  if (count_host) count.set(0, *count_host);
  for (Tensor* t : {&dA, &ddt})
    for (int64_t i = 0; i < t->numel(); ++i) t->set(i, NAN);
  DevArena arena;
  const TensorView dpart = arena.upload(part), dcount = arena.upload(count), ddA = arena.upload(dA),
                   dddt = arena.upload(ddt);
  const cuda::ElemType et = out == DType::kF32 ? cuda::ElemType::kF32 : cuda::ElemType::kBF16;
  cuda::GdnBwdParams p;
  p.f.HV = HV;
  p.dA_log = {ddA.data, et};
  p.ddt_bias = {dddt.data, et};
  const auto* cnt = count_host ? static_cast<const int32_t*>(dcount.data) : nullptr;
  const auto* pp = static_cast<const float*>(dpart.data);
  if (K == 1) cuda::launch_gdn_bwd_gate_reduce(p, pp, rows, cnt, nullptr);
  else cuda::launch_kda_bwd_gate_reduce(p, pp, rows, cnt, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const Tensor gA = download(ddA), gdt = download(dddt);
  const int64_t nr = count_host ? std::min<int64_t>(std::max<int32_t>(*count_host, 0), rows) : rows;
  const double tol = out == DType::kF32 ? 2e-6 : 8e-3;  // relative to the sum's scale
  std::vector<double> got;
  for (int j = 0; j < HV; ++j) {
    double a = 0.0, scale = 1.0;
    for (int c = 0; c < K; ++c) {
      double b = 0.0, bs = 1.0;
      for (int64_t r = 0; r < nr; ++r) {
        const int64_t o = ((r * HV + j) * K + c) * 2;
        a += part.get(o), b += part.get(o + 1);
        scale += std::fabs(part.get(o)), bs += std::fabs(part.get(o + 1));
      }
      EXPECT_LE(std::fabs(gdt.get(int64_t(j) * K + c) - b), tol * bs) << "ddt_bias[" << j << ", " << c << "] rows " << nr;
    }
    EXPECT_LE(std::fabs(gA.get(j) - a), tol * scale) << "dA_log[" << j << "] rows " << nr;
  }
  for (int64_t i = 0; i < gA.numel(); ++i) got.push_back(gA.get(i));
  for (int64_t i = 0; i < gdt.numel(); ++i) got.push_back(gdt.get(i));
  return got;
}

class CudaGateReduce : public ::testing::TestWithParam<int> {  // the width: 1 (GDN) or 128 (KDA)
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  }
};

TEST_P(CudaGateReduce, MatchesHostSumsForEveryRowCount) {
  const int K = GetParam();
  uint32_t seed = 11;
  for (int64_t rows : {1, 3, 7, 8, 37, 515}) {
    for (int32_t count : {-3, 0, 1, 5, 36, 600}) {
      SCOPED_TRACE(testing::Message() << "rows " << rows << " count " << count);
      run_and_check(3, K, rows, &count, DType::kF32, ++seed);
    }
    SCOPED_TRACE(testing::Message() << "rows " << rows << " no count");
    run_and_check(5, K, rows, nullptr, DType::kF32, ++seed);
    run_and_check(2, K, rows, nullptr, DType::kBF16, ++seed);
  }
}

TEST_P(CudaGateReduce, IsDeterministic) {
  const int K = GetParam();
  const int32_t count = 511;
  const auto a = run_and_check(4, K, 530, &count, DType::kF32, 99);
  const auto b = run_and_check(4, K, 530, &count, DType::kF32, 99);
  EXPECT_EQ(a, b);
}

INSTANTIATE_TEST_SUITE_P(Width, CudaGateReduce, ::testing::Values(1, 128),
                         [](const auto& info) { return info.param == 1 ? "gdn" : "kda"; });

}  // namespace
}  // namespace linattn::test

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
#include <cstring>
#include <random>
#include <vector>

#include "cuda/gdn/gdn_bwd_kernels.h"
#include "cuda_test_util.h"

namespace linattn::test {
namespace {

using cuda::ElemType;

struct DevMem {
  void* p = nullptr;
  explicit DevMem(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes ? bytes : 1), cudaSuccess); }
  ~DevMem() { cudaFree(p); }
  DevMem(const DevMem&) = delete;
  DevMem& operator=(const DevMem&) = delete;
};

float to_float(ElemType t, const std::vector<uint8_t>& raw, size_t i) {
  if (t == ElemType::kF32) {
    float f;
    std::memcpy(&f, raw.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, raw.data() + 2 * i, 2);
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Runs the reduce of width K (1: GDN, 128: KDA) over `rows` random rows with the given count, returns the raw
// output bytes (dA_log then ddt_bias) and checks them against the host's double sums.
std::vector<uint8_t> run_and_check(int HV, int K, int64_t rows, const int32_t* count_host, bool null_count,
                                   ElemType out, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> part(size_t(rows) * HV * K * 2);
  for (auto& x : part) x = nd(rng) * 10.f;
  const size_t esz = out == ElemType::kF32 ? 4 : 2;
  DevMem dpart(part.size() * 4), dcount(4), dA(HV * esz), ddt(size_t(HV) * K * esz);
  EXPECT_EQ(cudaMemcpy(dpart.p, part.data(), part.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  if (!null_count) {
    EXPECT_EQ(cudaMemcpy(dcount.p, count_host, 4, cudaMemcpyHostToDevice), cudaSuccess);
  }
  EXPECT_EQ(cudaMemset(dA.p, 0xff, HV * esz), cudaSuccess);
  EXPECT_EQ(cudaMemset(ddt.p, 0xff, size_t(HV) * K * esz), cudaSuccess);
  cuda::GdnBwdParams p;
  p.f.HV = HV;
  p.dA_log = {dA.p, out};
  p.ddt_bias = {ddt.p, out};
  const auto* cnt = null_count ? nullptr : static_cast<const int32_t*>(dcount.p);
  const auto* pp = static_cast<const float*>(dpart.p);
  if (K == 1) cuda::launch_gdn_bwd_gate_reduce(p, pp, rows, cnt, nullptr);
  else cuda::launch_kda_bwd_gate_reduce(p, pp, rows, cnt, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> raw((HV + size_t(HV) * K) * esz);
  EXPECT_EQ(cudaMemcpy(raw.data(), dA.p, HV * esz, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(raw.data() + HV * esz, ddt.p, size_t(HV) * K * esz, cudaMemcpyDeviceToHost), cudaSuccess);
  const int64_t nr = null_count ? rows : std::min<int64_t>(std::max<int32_t>(*count_host, 0), rows);
  const double tol = out == ElemType::kF32 ? 2e-6 : 8e-3;  // relative to the sum's scale
  for (int j = 0; j < HV; ++j) {
    double a = 0.0, scale = 1.0;
    for (int c = 0; c < K; ++c) {
      double b = 0.0, bs = 1.0;
      for (int64_t r = 0; r < nr; ++r) {
        const size_t o = ((size_t(r) * HV + j) * K + c) * 2;
        a += part[o], b += part[o + 1];
        scale += std::fabs(part[o]), bs += std::fabs(part[o + 1]);
      }
      const float got = to_float(out, raw, HV + size_t(j) * K + c);
      EXPECT_LE(std::fabs(got - b), tol * bs) << "ddt_bias[" << j << ", " << c << "] rows " << nr;
    }
    const float got = to_float(out, raw, j);
    EXPECT_LE(std::fabs(got - a), tol * scale) << "dA_log[" << j << "] rows " << nr;
  }
  return raw;
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
      run_and_check(3, K, rows, &count, false, ElemType::kF32, ++seed);
    }
    SCOPED_TRACE(testing::Message() << "rows " << rows << " no count");
    run_and_check(5, K, rows, nullptr, true, ElemType::kF32, ++seed);
    run_and_check(2, K, rows, nullptr, true, ElemType::kBF16, ++seed);
  }
}

TEST_P(CudaGateReduce, IsDeterministic) {
  const int K = GetParam();
  const int32_t count = 511;
  const auto a = run_and_check(4, K, 530, &count, false, ElemType::kF32, 99);
  const auto b = run_and_check(4, K, 530, &count, false, ElemType::kF32, 99);
  EXPECT_EQ(a, b);
}

INSTANTIATE_TEST_SUITE_P(Width, CudaGateReduce, ::testing::Values(1, 128),
                         [](const auto& info) { return info.param == 1 ? "gdn" : "kda"; });

}  // namespace
}  // namespace linattn::test

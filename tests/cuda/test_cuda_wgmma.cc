// The wgmma wrappers (src/cuda/common/wgmma.cuh) through their self-test kernel: C = A B^T for
// seeded random bf16 A [64, K], B [N, K], N 64 / 128, K 64 / 128 / 256 (one and several 64-wide
// K panels), every majorness of A and B (K-major and MN-major, the 128-byte swizzle), against an
// fp64 product of the same bf16 values; the K-major case also with both operands loaded by TMA
// (128-byte swizzle boxes behind an mbarrier). Also: an output filled with NaN beforehand is fully
// overwritten, and bad N / K raise errors naming the argument.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/half.h"
#include "cuda/common/wgmma_probe.h"
#include "cuda_test_util.h"
#include "linattn/error.h"

namespace linattn::test {
namespace {

struct Case {
  int N, K;
  bool a_mn, b_mn;
  bool tma = false;  // both K-major, staged by TMA
};

void run_case(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> a(64 * c.K), b(c.N * c.K);
  for (auto& x : a) x = float_to_bf16_bits(nd(rng));
  for (auto& x : b) x = float_to_bf16_bits(nd(rng));
  void *da = nullptr, *db = nullptr;
  float* dc = nullptr;
  CUDA_OK(cudaMalloc(&da, a.size() * 2));
  CUDA_OK(cudaMalloc(&db, b.size() * 2));
  CUDA_OK(cudaMalloc(&dc, size_t(64) * c.N * 4));
  CUDA_OK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dc, 0xFF, size_t(64) * c.N * 4));  // NaN: every element must be written
  if (c.tma) cuda::wgmma_probe_gemm_tma(da, db, dc, c.N, c.K, nullptr);
  else cuda::wgmma_probe_gemm(da, db, dc, c.N, c.K, c.a_mn, c.b_mn, nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> got(size_t(64) * c.N);
  CUDA_OK(cudaMemcpy(got.data(), dc, got.size() * 4, cudaMemcpyDeviceToHost));
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  double worst = 0;
  int wi = -1;
  double want_at = 0;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < c.N; ++n) {
      double want = 0;
      for (int k = 0; k < c.K; ++k)
        want += double(bf16_bits_to_float(a[m * c.K + k])) * double(bf16_bits_to_float(b[n * c.K + k]));
      const double err = std::isfinite(got[m * c.N + n]) ? std::abs(got[m * c.N + n] - want) : INFINITY;
      if (!(err <= worst)) {
        worst = err;
        wi = m * c.N + n;
        want_at = want;
      }
    }
  // fp32 accumulation of K products of magnitude ~1: |error| well under 1e-3 * sqrt(K).
  EXPECT_LT(worst, 1e-3 * std::sqrt(double(c.K)))
      << "N " << c.N << " K " << c.K << " a_mn " << c.a_mn << " b_mn " << c.b_mn << " tma " << c.tma << ": worst at (" << wi / c.N
      << ", " << wi % c.N << ") got " << got[wi] << " want " << want_at;
}

TEST(CudaWgmma, AllMajornessAndShapes) {
  ASSERT_TRUE(have_cuda_device());
  uint64_t seed = 7;
  for (int N : {64, 128})
    for (int K : {64, 128, 256})
      for (bool a_mn : {false, true})
        for (bool b_mn : {false, true}) run_case({N, K, a_mn, b_mn}, seed++);
}

TEST(CudaWgmma, TmaStagedOperands) {
  ASSERT_TRUE(have_cuda_device());
  uint64_t seed = 101;
  for (int N : {64, 128})
    for (int K : {64, 128, 256}) run_case({N, K, false, false, true}, seed++);
}

TEST(CudaWgmma, RejectsBadShapes) {
  ASSERT_TRUE(have_cuda_device());
  try {
    cuda::wgmma_probe_gemm(nullptr, nullptr, nullptr, 96, 64, false, false, nullptr);
    FAIL() << "N = 96 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("N: expected 64 or 128, got 96"), std::string::npos) << e.what();
  }
  try {
    cuda::wgmma_probe_gemm(nullptr, nullptr, nullptr, 64, 80, false, false, nullptr);
    FAIL() << "K = 80 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("K: expected a multiple of 64"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace linattn::test

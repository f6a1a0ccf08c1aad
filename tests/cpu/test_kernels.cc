// CPU building blocks against plain double loops: the blocked GEMM (strides, transposed A,
// scaled accumulation, triangular k / n limits, every tail), the unit-lower solve, the vector
// exp / softplus / sigmoid (accuracy, flush to 0 below e^-87.3, +inf above), row conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/chunk_attn_gen.h"
#include "core/half.h"
#include "cpu/convert.h"
#include "cpu/gemm.h"
#include "cpu/gemm_bf16.h"
#include "cpu/simd.h"

namespace linattn::test {
namespace {

std::vector<float> rand_vec(Rng& rng, size_t n) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

TEST(CpuGemm, MatchesNaiveAllShapes) {
  Rng rng(1);
  for (int M : {1, 5, 6, 13, 64})
    for (int N : {1, 15, 16, 17, 64, 65, 130})
      for (int Kd : {0, 1, 7, 64})
        for (int mode = 0; mode < 4; ++mode) {  // 0 plain, 1 A^T, 2 scaled accumulate, 3 row-scaled + k_tri
          const bool at = mode == 1;
          const int64_t lda = at ? M + 3 : Kd + 2, ldb = N + 5, ldc = N + 1;
          std::vector<float> A = rand_vec(rng, static_cast<size_t>((at ? Kd : M) * lda + 1));
          const std::vector<float> B = rand_vec(rng, static_cast<size_t>(Kd * ldb + 1));
          std::vector<float> C = rand_vec(rng, static_cast<size_t>(M * ldc));
          const std::vector<float> rs = rand_vec(rng, static_cast<size_t>(M));
          const std::vector<float> C0 = C;
          cpu::GemmArgs g;
          g.M = M;
          g.N = N;
          g.Kd = Kd;
          g.A = A.data();
          g.a_rs = at ? 1 : lda;
          g.a_ks = at ? lda : 1;
          g.B = B.data();
          g.ldb = ldb;
          g.C = C.data();
          g.ldc = ldc;
          g.accumulate = mode >= 2;
          g.c_scale = 0.75f;
          g.c_row_scale = mode == 3 ? rs.data() : nullptr;
          g.k_tri = mode == 3;
          if (mode == 3)  // a masked lower-triangular A (zeros above the diagonal)
            for (int r = 0; r < M; ++r)
              for (int k = r + 1; k < Kd; ++k) A[r * lda + k] = 0.0f;
          cpu::gemm(g);
          for (int r = 0; r < M; ++r)
            for (int c = 0; c < N; ++c) {
              double ref = 0;
              if (mode >= 2) ref = static_cast<double>(C0[r * ldc + c]) * (mode == 3 ? rs[r] : 0.75f);
              for (int k = 0; k < Kd; ++k)
                ref += static_cast<double>(A[at ? k * lda + r : r * lda + k]) * B[k * ldb + c];
              ASSERT_NEAR(C[r * ldc + c], ref, 1e-4 * (1 + std::fabs(ref)))
                  << "M " << M << " N " << N << " Kd " << Kd << " mode " << mode << " at (" << r << ", " << c << ")";
            }
        }
}

TEST(CpuGemm, TriangularColumnsOnly) {
  Rng rng(2);
  const int n = 37, K = 19;
  const std::vector<float> A = rand_vec(rng, n * K), B = rand_vec(rng, K * n);
  std::vector<float> C(n * n, NAN);
  cpu::GemmArgs g;
  g.M = n;
  g.N = n;
  g.Kd = K;
  g.A = A.data();
  g.a_rs = K;
  g.B = B.data();
  g.ldb = n;
  g.C = C.data();
  g.ldc = n;
  g.n_tri = true;
  cpu::gemm(g);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c <= r; ++c) {
      double ref = 0;
      for (int k = 0; k < K; ++k) ref += static_cast<double>(A[r * K + k]) * B[k * n + c];
      ASSERT_NEAR(C[r * n + c], ref, 1e-4 * (1 + std::fabs(ref))) << r << ", " << c;
    }
}

// bf16 dot-product GEMM over packed operands equals the double product of the bf16-rounded
// values (A pairs packed along rows, B pairs interleaved across rows; odd k pads with zero).
TEST(CpuGemmBf16, PackedProductMatchesNaive) {
  Rng rng(5);
  for (int M : {1, 6, 7, 20})
    for (int N : {1, 16, 17, 70})
      for (int Kd : {1, 2, 9, 64}) {
        const int Kp = (Kd + 1) / 2;
        const std::vector<float> A = rand_vec(rng, M * Kd), B = rand_vec(rng, Kd * N);
        std::vector<uint32_t> A2(M * Kp), B2(Kp * N);
        cpu::pack_bf16_rows(M, Kd, A.data(), Kd, A2.data(), Kp);
        cpu::pack_bf16_row_pairs(Kd, N, B.data(), N, B2.data(), N);
        std::vector<float> C(M * N, 1.0f);
        cpu::GemmBf16Args g;
        g.M = M;
        g.N = N;
        g.Kp = Kp;
        g.A = A2.data();
        g.a_rs = Kp;
        g.B = B2.data();
        g.ldb = N;
        g.C = C.data();
        g.ldc = N;
        g.accumulate = true;
        g.c_scale = 0.5f;
        cpu::gemm_bf16(g);
        for (int r = 0; r < M; ++r)
          for (int c = 0; c < N; ++c) {
            double ref = 0.5;
            for (int k = 0; k < Kd; ++k)
              ref += static_cast<double>(round_to_bf16(A[r * Kd + k])) * round_to_bf16(B[k * N + c]);
            ASSERT_NEAR(C[r * N + c], ref, 1e-4 * (1 + std::fabs(ref))) << M << " " << N << " " << Kd << " at " << r << ", " << c;
          }
      }
}

TEST(CpuTrsm, SolvesUnitLower) {
  Rng rng(3);
  for (int n : {1, 6, 7, 64})
    for (int N : {1, 16, 33}) {
      const int64_t ldl = n + 2, ldx = N + 3;
      std::vector<float> L(n * ldl, NAN), X = rand_vec(rng, n * ldx);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < i; ++j) L[i * ldl + j] = static_cast<float>(0.3 * rng.normal() / std::sqrt(n));
      const std::vector<float> X0 = X;
      cpu::trsm_unit_lower(n, N, L.data(), ldl, X.data(), ldx);
      // Check (I - L) Y = X0 in double.
      for (int i = 0; i < n; ++i)
        for (int c = 0; c < N; ++c) {
          double lhs = X[i * ldx + c];
          for (int j = 0; j < i; ++j) lhs -= static_cast<double>(L[i * ldl + j]) * X[j * ldx + c];
          ASSERT_NEAR(lhs, X0[i * ldx + c], 1e-4 * (1 + std::fabs(X0[i * ldx + c]))) << n << " " << i << " " << c;
        }
    }
}

TEST(CpuTranspose, AllShapes) {
  Rng rng(6);
  for (int R : {1, 15, 16, 33, 64})
    for (int C : {1, 16, 17, 48, 130}) {
      const std::vector<float> src = rand_vec(rng, R * (C + 3));
      std::vector<float> dst(C * (R + 5), NAN);
      cpu::transpose(R, C, src.data(), C + 3, dst.data(), R + 5);
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) ASSERT_EQ(dst[c * (R + 5) + r], src[r * (C + 3) + c]) << R << "x" << C << " at " << r << "," << c;
    }
}

TEST(CpuSimd, ExpSoftplusSigmoid) {
  using namespace cpu::simd;
  double worst = 0;
  for (double x = -87.0; x <= 88.0; x += 0.01171875) {
    const double e = std::exp(x), got = exp1(static_cast<float>(x));
    worst = std::max(worst, std::fabs(got - e) / e);
  }
  EXPECT_LT(worst, 4e-7);
  EXPECT_EQ(exp1(-87.5f), 0.0f);
  EXPECT_EQ(exp1(-1000.0f), 0.0f);
  EXPECT_EQ(exp1(-INFINITY), 0.0f);
  EXPECT_TRUE(std::isinf(exp1(89.0f)));
  EXPECT_EQ(exp1(0.0f), 1.0f);
  for (double x = -30; x <= 30; x += 0.37) {
    const double sp = x > 20 ? x : std::log1p(std::exp(x));
    EXPECT_NEAR(softplus1(static_cast<float>(x)), sp, 3e-7 * (1 + sp)) << x;
    EXPECT_NEAR(sigmoid1(static_cast<float>(x)), 1 / (1 + std::exp(-x)), 3e-7) << x;
  }
  EXPECT_EQ(softplus1(25.0f), 25.0f);
  EXPECT_EQ(sigmoid1(-200.0f), 0.0f);
}

TEST(CpuConvert, RowsRoundTripAllDtypes) {
  Rng rng(4);
  const std::vector<float> x = rand_vec(rng, 53);
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16, DType::kF64}) {
    std::vector<unsigned char> buf((x.size() + 5) * 8);
    cpu::store_row(x.data(), static_cast<int64_t>(x.size()), dt, buf.data(), 5);
    std::vector<float> back(x.size());
    cpu::load_row(buf.data(), dt, 5, static_cast<int64_t>(x.size()), back.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = dt == DType::kBF16 ? round_to_bf16(x[i]) : dt == DType::kF16 ? round_to_fp16(x[i]) : x[i];
      ASSERT_EQ(back[i], want) << dtype_name(dt) << " " << i;
      ASSERT_EQ(cpu::load_one(buf.data(), dt, 5 + static_cast<int64_t>(i)), want);
    }
  }
}

}  // namespace
}  // namespace linattn::test

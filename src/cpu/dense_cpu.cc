// CPU dense helpers (see dense_cpu.h).
#include "cpu/dense_cpu.h"

#include <cblas.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "core/util.h"
#include "cpu/dtype_io.h"

namespace linattn::cpu {

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (M == 0 || N == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

namespace {

inline float sigmoidf(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// act(g) and d act / d g.
inline void gate_act(float g, bool sig, float* a, float* da) {
  const float s = sigmoidf(g);
  if (sig) {
    *a = s;
    *da = s * (1.0f - s);
  } else {
    *a = g * s;
    *da = s * (1.0f + g * (1.0f - s));
  }
}

float row_rstd(const RmsNormParams& p, int64_t r) {
  double ss = 0;
  for (int64_t d = 0; d < p.D; ++d) {
    const float v = load_as_float(p.x, p.x_dtype, r * p.D + d);
    ss += static_cast<double>(v) * v;
  }
  return 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(p.D)) + p.eps);
}

constexpr int64_t kRowBlock = 256;

}  // namespace

void rms_norm_gated_fwd(const RmsNormParams& p, void* y, DType y_dtype, float* rstd_out) {
  parallel_for(p.R, [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) {
      const float rstd = row_rstd(p, r);
      if (rstd_out) rstd_out[r] = rstd;
      for (int64_t d = 0; d < p.D; ++d) {
        float a, da;
        gate_act(load_as_float(p.g, p.g_dtype, r * p.D + d), p.sigmoid_gate, &a, &da);
        const float xh = load_as_float(p.x, p.x_dtype, r * p.D + d) * rstd;
        store_from_float(y, y_dtype, r * p.D + d, xh * p.w[d] * a);
      }
    }
  });
}

void rms_norm_gated_bwd(const RmsNormParams& p, const void* dy, DType dy_dtype, void* dx,
                        DType dx_dtype, void* dg, DType dg_dtype, float* dw, int64_t valid_rows) {
  const int64_t R = p.R, D = p.D;
  const int64_t nv = valid_rows < 0 ? R : std::min(valid_rows, R);
  const int64_t nblk = ceil_div(R, kRowBlock);
  std::vector<float> part(static_cast<size_t>(nblk * D), 0.0f);
  parallel_for(nblk, [&](int64_t bb, int64_t be, int) {
    std::vector<float> dyw(D), xh(D);
    for (int64_t blk = bb; blk < be; ++blk) {
      float* pw = part.data() + blk * D;
      for (int64_t r = blk * kRowBlock; r < std::min(R, (blk + 1) * kRowBlock); ++r) {
        if (r >= nv) {
          for (int64_t d = 0; d < D; ++d) {
            if (dx) store_from_float(dx, dx_dtype, r * D + d, 0.0f);
            if (dg) store_from_float(dg, dg_dtype, r * D + d, 0.0f);
          }
          continue;
        }
        const float rstd = row_rstd(p, r);
        double mean = 0;
        for (int64_t d = 0; d < D; ++d) {
          const int64_t i = r * D + d;
          float a, da;
          const float gv = load_as_float(p.g, p.g_dtype, i);
          gate_act(gv, p.sigmoid_gate, &a, &da);
          xh[d] = load_as_float(p.x, p.x_dtype, i) * rstd;
          const float dyv = load_as_float(dy, dy_dtype, i);
          if (dg) store_from_float(dg, dg_dtype, i, dyv * xh[d] * p.w[d] * da);
          const float dyg = dyv * a;  // dy' = dy * act(g)
          pw[d] += dyg * xh[d];
          dyw[d] = dyg * p.w[d];
          mean += static_cast<double>(xh[d]) * dyw[d];
        }
        const float m = static_cast<float>(mean / static_cast<double>(D));
        if (dx)
          for (int64_t d = 0; d < D; ++d) store_from_float(dx, dx_dtype, r * D + d, rstd * (dyw[d] - xh[d] * m));
      }
    }
  });
  for (int64_t d = 0; d < D; ++d) {
    float s = 0;
    for (int64_t blk = 0; blk < nblk; ++blk) s += part[blk * D + d];
    dw[d] = s;
  }
}

void zero_rows(void* data, int64_t R, int64_t row_bytes, int64_t first_row) {
  if (first_row < 0) first_row = 0;
  if (first_row >= R) return;
  std::memset(static_cast<char*>(data) + first_row * row_bytes, 0,
              static_cast<size_t>((R - first_row) * row_bytes));
}

}  // namespace linattn::cpu

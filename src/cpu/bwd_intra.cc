// Intra-chunk gate policy of the CPU chunk backward: the pairwise decay E_ij = e^(gam_i - gam_j)
// (j <= i) inside Aqk = scale (q_i . k_j E_ij) and L = beta_i (k_i . k_j E_ij), and their backward:
//   dq_i += scale sum_j dAqk_ij k_j E_ij                       (dq2)
//   dka_j = scale sum_i dAqk_ij q_i E_ij + sum_i dL_ij beta_i k_i E_ij   (dk2 + t)
//   r'_i  = sum_j dL_ij k_j E_ij;  dbeta_i += k_i . r'_i;  r_i = beta_i r'_i
// GDN: E is a scalar matrix D, so all of these are GEMMs on D-masked matrices.
// KDA: E is channelwise; exponents are formed only for j <= i (never positive), so gates of
// -1000 give exact zeros, not inf * 0.
#include <algorithm>
#include <cstring>

#include "cpu/bwd_blas.h"
#include "cpu/bwd_worker.h"

namespace linattn::cpu::bwd {

void Worker::intra_fwd(int n, bool with_aqk) {
  const int K = K_, BT = BT_;
  WorkerBufs& b = b_;
  if (!p_.f.kda) {
    transpose(n, K, b.k, K, b.tmp, n);  // K^T [K, n]
    gemm(n, n, K, 1.0f, b.k, K, false, b.tmp, n, b.L, BT, false);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) b.L[i * BT + j] = j < i ? b.beta[i] * b.L[i * BT + j] * b.D[i * BT + j] : 0.0f;
    if (!with_aqk) return;
    gemm(n, n, K, p_.f.scale, b.q, K, false, b.tmp, n, b.aqk, BT, false);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) b.aqk[i * BT + j] = j <= i ? b.aqk[i * BT + j] * b.D[i * BT + j] : 0.0f;
    return;
  }
  float* e = b.earg;
  for (int i = 0; i < n; ++i) {
    const double* gi = b.gam + static_cast<int64_t>(i) * K;
    const float* qi = b.q + i * K;
    const float* ki = b.k + i * K;
    for (int j = 0; j <= i; ++j) {
      const double* gj = b.gam + static_cast<int64_t>(j) * K;
      for (int d = 0; d < K; ++d) e[d] = static_cast<float>(gi[d] - gj[d]);
      vexp(K, e, e);
      const float* kj = b.k + j * K;
      if (with_aqk) {
        float s = 0.0f;
        for (int d = 0; d < K; ++d) s += qi[d] * kj[d] * e[d];
        b.aqk[i * BT + j] = p_.f.scale * s;
      }
      float s = 0.0f;
      for (int d = 0; d < K; ++d) s += ki[d] * kj[d] * e[d];
      b.L[i * BT + j] = j < i ? b.beta[i] * s : 0.0f;
    }
    for (int j = i + 1; j < n; ++j) {
      b.L[i * BT + j] = 0.0f;
      if (with_aqk) b.aqk[i * BT + j] = 0.0f;
    }
  }
}

void Worker::intra_bwd(int n) {
  const int K = K_, BT = BT_;
  WorkerBufs& b = b_;
  if (!p_.f.kda) {
    // P = scale dAqk . D (lower), R = dL . D (strictly lower), in place.
    for (int i = 0; i < n; ++i)
      for (int j = 0; j <= i; ++j) {
        b.daqk[i * BT + j] *= p_.f.scale * b.D[i * BT + j];
        b.dL[i * BT + j] *= b.D[i * BT + j];
      }
    gemm(n, K, n, 1.0f, b.daqk, BT, false, b.k, K, b.dq, K, true);   // dq += P K
    gemm(n, K, n, 1.0f, b.dL, BT, false, b.k, K, b.r, K, false);     // r' = R K
    gemm(n, K, n, 1.0f, b.daqk, BT, true, b.q, K, b.dka, K, false);  // dka = P^T Q
    for (int i = 0; i < n; ++i) {
      const float* k = b.k + i * K;
      float* r = b.r + i * K;
      float s = 0.0f;
      for (int d = 0; d < K; ++d) s += k[d] * r[d];
      b.dbeta[i] += s;
      for (int d = 0; d < K; ++d) r[d] *= b.beta[i];
      for (int j = 0; j < i; ++j) b.dL[i * BT + j] *= b.beta[i];
    }
    gemm(n, K, n, 1.0f, b.dL, BT, true, b.k, K, b.dka, K, true);  // dka += (beta R)^T K
    return;
  }
  std::memset(b.dka, 0, sizeof(float) * n * K);
  std::memset(b.r, 0, sizeof(float) * n * K);
  float* e = b.earg;
  for (int i = 0; i < n; ++i) {
    const double* gi = b.gam + static_cast<int64_t>(i) * K;
    const float* qi = b.q + i * K;
    const float* ki = b.k + i * K;
    float* dqi = b.dq + i * K;
    float* ri = b.r + i * K;
    const float bi = b.beta[i];
    for (int j = 0; j <= i; ++j) {
      const double* gj = b.gam + static_cast<int64_t>(j) * K;
      for (int d = 0; d < K; ++d) e[d] = static_cast<float>(gi[d] - gj[d]);
      vexp(K, e, e);
      const float* kj = b.k + j * K;
      float* dkaj = b.dka + j * K;
      const float a = p_.f.scale * b.daqk[i * BT + j];
      const float l = j < i ? b.dL[i * BT + j] : 0.0f;
      for (int d = 0; d < K; ++d) {
        dqi[d] += a * kj[d] * e[d];
        ri[d] += l * kj[d] * e[d];
        dkaj[d] += (a * qi[d] + l * bi * ki[d]) * e[d];
      }
    }
    float s = 0.0f;
    for (int d = 0; d < K; ++d) s += ki[d] * ri[d];
    b.dbeta[i] += s;
    for (int d = 0; d < K; ++d) ri[d] *= bi;
  }
}

}  // namespace linattn::cpu::bwd

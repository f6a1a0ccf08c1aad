// Intra-chunk gate policy of the CPU chunk backward. E_ij = e^(gam_i - gam_j) (j <= i) inside
//   aqk_ij = q_i . k_j E_ij (j <= i)   and   L_ij = beta_i k_i . k_j E_ij (j < i) (kept as Ln = -L),
// and their backward, with P = daqk (.) E and R = dL (.) E taken elementwise per channel:
//   dq_i += sum_j P_ij k_j;  dka_j = sum_i P_ij q_i + R_ij beta_i k_i;  r'_i = sum_j R_ij k_j,
//   dbeta_i += k_i . r'_i, r_i = beta_i r'_i.
// GDN: E is a scalar matrix D, so these are triangular GEMMs on D-masked matrices.
// KDA: rows of 16-row sub-chunk s are scaled to its first row (rho), columns of sub-chunk c to
// its last row (kap), and the pair factor px = e^(gam_first(s) - gam_last(c)) joins them: every
// factor is a product of e^g <= 1, so off-diagonal sub-chunk pairs are GEMMs that cannot
// overflow; diagonal sub-chunks pair row by row with running products.
#include <algorithm>
#include <cstring>

#include "cpu/bwd_blas.h"
#include "cpu/bwd_vec.h"
#include "cpu/bwd_worker.h"

namespace linattn::cpu::bwd {

using namespace simd;
constexpr int kBC = 16;

void Worker::intra_fwd(int n, bool with_aqk) {
  const int K = K_, BT = BT_;
  WorkerBufs& b = b_;
  const float* src = with_aqk ? b.q : b.k;
  float* out = with_aqk ? b.aqk : b.Ln;
  const int diag = with_aqk ? 1 : 0;  // aqk keeps the diagonal, L is strictly lower
  if (!p_.f.kda) {
    transpose(n, K, b.k, K, b.kT, BT);
    mm_to_lower(n, K, src, K, b.kT, BT, out, BT, false);
    for (int i = 0; i < n; ++i) {
      float* o = out + i * BT;
      vmul(o, b.D + i * BT, o, i + diag);
      if (!with_aqk) vscale(-b.beta[i], o, o, i);
      vfill(o + i + diag, 0.0f, n - i - diag);
    }
    return;
  }
  transpose(n, K, b.kk, K, b.kT, BT);
  for (int i = 0; i < n; ++i) vfill(out + i * BT, 0.0f, n);
  for (int s0 = kBC, sc = 1; s0 < n; s0 += kBC, ++sc) {
    const int rows = std::min(n - s0, kBC);
    std::memcpy(b.px, b.ag + s0 * K, sizeof(float) * K);
    for (int c = sc - 1; c >= 0; --c) {
      if (c < sc - 1) vmul(b.px, b.bp + (c + 1) * K, b.px, K);
      for (int i = 0; i < rows; ++i) {
        vmul(src + (s0 + i) * K, b.rho + (s0 + i) * K, b.z + i * K, K);
        vmul(b.z + i * K, b.px, b.z + i * K, K);
      }
      mm(rows, kBC, K, b.z, K, 1, b.kT + c * kBC, BT, b.zo, kBC, false);
      for (int i = 0; i < rows; ++i)
        vscale(with_aqk ? 1.0f : -b.beta[s0 + i], b.zo + i * kBC, out + (s0 + i) * BT + c * kBC, kBC);
    }
  }
  float* R = b.z;
  for (int s0 = 0; s0 < n; s0 += kBC) {
    const int s1 = std::min(n, s0 + kBC);
    for (int i = s0; i < s1; ++i) {
      float* o = out + i * BT;
      const float f = with_aqk ? 1.0f : -b.beta[i];
      std::memcpy(R, src + i * K, sizeof(float) * K);
      if (with_aqk) o[i] = vdot(R, b.k + i * K, K);
      for (int j = i - 1; j >= s0; --j) {
        vmul(R, b.ag + (j + 1) * K, R, K);
        o[j] = f * vdot(R, b.k + j * K, K);
      }
    }
  }
}

void Worker::intra_bwd(int n) {
  const int K = K_, BT = BT_;
  WorkerBufs& b = b_;
  if (!p_.f.kda) {
    for (int i = 0; i < n; ++i) {  // P = daqk (.) D on and below the diagonal, R = dL (.) D
      float* pr = b.daqk + i * BT;
      vmul(pr, b.D + i * BT, pr, i + 1);
      vfill(pr + i + 1, 0.0f, n - i - 1);
      vmul(b.dL + i * BT, b.D + i * BT, b.dL + i * BT, i);
    }
    mm_lower(n, K, b.daqk, BT, b.k, K, b.dq, K, true);    // dq += P k
    mm_lower(n, K, b.dL, BT, b.k, K, b.r, K, false);      // r' = R k
    mm_lower_t(n, K, b.daqk, BT, b.q, K, b.dka, K, false);  // dka = P^T q
    for (int i = 0; i < n; ++i) {
      b.dbeta[i] += vdot(b.k + i * K, b.r + i * K, K);
      vscale(b.beta[i], b.r + i * K, b.r + i * K, K);
      vscale(b.beta[i], b.dL + i * BT, b.dL + i * BT, i);
    }
    mm_lower_t(n, K, b.dL, BT, b.k, K, b.dka, K, true);  // dka += (beta R)^T k
    return;
  }
  std::memset(b.dka, 0, sizeof(float) * n * K);
  std::memset(b.r, 0, sizeof(float) * n * K);
  kda_offdiag_bwd(n);
  kda_diag_bwd(n);
  for (int i = 0; i < n; ++i) {
    b.dbeta[i] += vdot(b.k + i * K, b.r + i * K, K);
    vscale(b.beta[i], b.r + i * K, b.r + i * K, K);
  }
}

void Worker::kda_offdiag_bwd(int n) {
  const int K = K_, BT = BT_;
  WorkerBufs& b = b_;
  for (int s0 = kBC, sc = 1; s0 < n; s0 += kBC, ++sc) {
    const int rows = std::min(n - s0, kBC);
    std::memcpy(b.px, b.ag + s0 * K, sizeof(float) * K);
    for (int c = sc - 1; c >= 0; --c) {
      if (c < sc - 1) vmul(b.px, b.bp + (c + 1) * K, b.px, K);
      const int c0 = c * kBC;
      const float* G = b.daqk + s0 * BT + c0;
      const float* Hm = b.dL + s0 * BT + c0;
      // Row side: [G; H] (k kap)_c, then rho_i px into dq_i and r'_i.
      mm(rows, K, kBC, G, BT, 1, b.kk + c0 * K, K, b.zo, K, false);
      mm(rows, K, kBC, Hm, BT, 1, b.kk + c0 * K, K, b.zo + rows * K, K, false);
      for (int i = 0; i < rows; ++i) {
        const float* rh = b.rho + (s0 + i) * K;
        float* dq = b.dq + (s0 + i) * K;
        float* r = b.r + (s0 + i) * K;
        const float* z0 = b.zo + i * K;
        const float* z1 = b.zo + (rows + i) * K;
        for (int d = 0; d < K; d += kW) {
          const Tail t = tail_of(K - d);
          const VF f = mul(load(rh + d, t), load(b.px + d, t));
          store(dq + d, fma(f, load(z0 + d, t), load(dq + d, t)), t);
          store(r + d, fma(f, load(z1 + d, t), load(r + d, t)), t);
        }
      }
      // Column side: G^T (q rho)_s + H^T (beta k rho)_s, then kap_j px into dka_j.
      mm(kBC, K, rows, G, 1, BT, b.qr + s0 * K, K, b.zo, K, false);
      mm(kBC, K, rows, Hm, 1, BT, b.bkr + s0 * K, K, b.zo, K, true);
      for (int j = 0; j < kBC; ++j) {
        const float* kp = b.kap + (c0 + j) * K;
        float* dka = b.dka + (c0 + j) * K;
        const float* z = b.zo + j * K;
        for (int d = 0; d < K; d += kW) {
          const Tail t = tail_of(K - d);
          const VF f = mul(load(kp + d, t), load(b.px + d, t));
          store(dka + d, fma(f, load(z + d, t), load(dka + d, t)), t);
        }
      }
    }
  }
}

void Worker::kda_diag_bwd(int n) {
  const int K = K_, BT = BT_;
  WorkerBufs& b = b_;
  float* e = b.z;
  float* acc = b.z + K;
  for (int s0 = 0; s0 < n; s0 += kBC) {
    const int s1 = std::min(n, s0 + kBC);
    for (int j = s0; j < s1; ++j) {
      const float* kj = b.k + j * K;
      vfill(e, 1.0f, K);
      vfill(acc, 0.0f, K);
      for (int i = j; i < s1; ++i) {
        if (i > j) vmul(e, b.ag + i * K, e, K);
        const VF gv = set1(b.daqk[i * BT + j]);
        const VF hv = set1(i > j ? b.dL[i * BT + j] : 0.0f);
        const VF hb = set1(i > j ? b.dL[i * BT + j] * b.beta[i] : 0.0f);
        const float* qi = b.q + i * K;
        const float* ki = b.k + i * K;
        float* dq = b.dq + i * K;
        float* r = b.r + i * K;
        for (int d = 0; d < K; d += kW) {
          const Tail t = tail_of(K - d);
          const VF ev = load(e + d, t);
          const VF ke = mul(load(kj + d, t), ev);
          store(dq + d, fma(gv, ke, load(dq + d, t)), t);
          store(r + d, fma(hv, ke, load(r + d, t)), t);
          const VF cv = fma(gv, load(qi + d, t), mul(hb, load(ki + d, t)));
          store(acc + d, fma(cv, ev, load(acc + d, t)), t);
        }
      }
      vadd(b.dka + j * K, acc, b.dka + j * K, K);
    }
  }
}

}  // namespace linattn::cpu::bwd

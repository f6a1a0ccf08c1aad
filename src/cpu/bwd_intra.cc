// Intra-chunk gate policy of the CPU chunk backward. E_ij = e^(gam_i - gam_j) (j <= i) inside
//   aqk_ij = q_i . k_j E_ij (j <= i)   and   L_ij = beta_i k_i . k_j E_ij (j < i) (kept as Ln = -L),
// and their backward, with P = daqk (.) E and R = dL (.) E taken elementwise per channel:
//   dq_i += sum_j P_ij k_j;  dka_j = sum_i P_ij q_i + R_ij beta_i k_i;  r'_i = sum_j R_ij k_j,
//   dbeta_i += k_i . r'_i, r_i = beta_i r'_i.
// GDN: E is a scalar matrix D, so these are triangular GEMMs on D-masked matrices.
// KDA: per 16-row sub-chunk with factored decays, in bwd_kda_intra.cc.
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
  kda_intra_fwd(n, with_aqk);
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
  kda_intra_bwd(n);
}

}  // namespace linattn::cpu::bwd

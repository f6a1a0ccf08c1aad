// KDA intra-chunk terms of the CPU chunk backward, one 16-row sub-chunk s of rows at a time.
// E_ijd = e^(gam_id - gam_jd) is split as rho_i . colfac_j with rho_i = e^(gam_i - gam_first(s))
// and, for a column j in an earlier sub-chunk c, colfac_j = kap_j . px_{s,c} (kap_j =
// e^(gam_last(c) - gam_j), px_{s,c} = e^(gam_first(s) - gam_last(c))): every factor is a product
// of e^g <= 1, so these pairs cannot overflow. On the diagonal sub-chunk colfac_j = 1 / rho_j,
// which is used only while rho stays >= 1e-18 over the sub-chunk (its decay is under ~41 nats);
// otherwise that sub-chunk pairs row by row with exact running products (gates of -1000).
// With col_j = k_j . colfac_j, per sub-chunk s (m rows, columns 0 .. s0+m):
//   forward   aqk[s, :] = (q rho)_s col^T,   Ln[s, :] = -beta (k rho)_s col^T   (masked)
//   backward  [dq2; r']_s = rho . ([G; H]_s col),  dka_j += colfac_j . (G^T (q rho) + H^T (beta k rho))_j
#include <algorithm>
#include <cstring>

#include "cpu/bwd_blas.h"
#include "cpu/bwd_vec.h"
#include "cpu/bwd_worker.h"

namespace linattn::cpu::bwd {

using namespace simd;
constexpr int kBC = 16;
constexpr float kMinRho = 1e-18f;

void Worker::kda_block_factors(int n) {
  const int K = K_;
  WorkerBufs& b = b_;
  for (int s0 = 0, sc = 0; s0 < n; s0 += kBC, ++sc) {
    const int s1 = std::min(n, s0 + kBC);
    const float* last = b.rho + (s1 - 1) * K;
    bool safe = true;
    for (int d = 0; d < K; ++d) safe = safe && last[d] >= kMinRho;
    diag_safe_[sc] = safe;
    if (!safe) continue;
    for (int i = s0; i < s1; ++i) {
      float* ir = b.irho + i * K;
      const float* rh = b.rho + i * K;
      for (int d = 0; d < K; d += kW) {
        const Tail t = tail_of(K - d);
        store(ir + d, div(set1(1.0f), load(rh + d, t)), t);
      }
    }
  }
}

// colfac and col rows for the columns [0, s0 + (diagonal safe ? m : 0)) of row sub-chunk sc.
int Worker::kda_columns(int sc, int s0, int m) {
  const int K = K_;
  WorkerBufs& b = b_;
  if (sc > 0) std::memcpy(b.px, b.ag + s0 * K, sizeof(float) * K);  // px_{s, s-1} = a_{s0}
  for (int c = sc - 1; c >= 0; --c) {
    if (c < sc - 1) vmul(b.px, b.bp + (c + 1) * K, b.px, K);
    for (int j = c * kBC; j < (c + 1) * kBC; ++j) vmul(b.kap + j * K, b.px, b.colfac + j * K, K);
  }
  int cols = s0;
  if (diag_safe_[sc]) {
    std::memcpy(b.colfac + s0 * K, b.irho + s0 * K, sizeof(float) * m * K);
    cols += m;
  }
  vmul(b.k, b.colfac, b.col, static_cast<int64_t>(cols) * K);
  return cols;
}

void Worker::kda_intra_fwd(int n, bool with_aqk) {
  const int K = K_, BT = BT_;
  WorkerBufs& b = b_;
  const float* src = with_aqk ? b.q : b.k;
  float* out = with_aqk ? b.aqk : b.Ln;
  for (int i = 0; i < n; ++i) vfill(out + i * BT, 0.0f, n);
  for (int s0 = 0, sc = 0; s0 < n; s0 += kBC, ++sc) {
    const int m = std::min(n - s0, kBC);
    const int cols = kda_columns(sc, s0, m);
    if (cols > 0) {
      vmul(src + s0 * K, b.rho + s0 * K, b.z, static_cast<int64_t>(m) * K);
      transpose(cols, K, b.col, K, b.kT, BT);
      mm(m, cols, K, b.z, K, 1, b.kT, BT, out + s0 * BT, BT, false);
    }
    for (int i = s0; i < s0 + m; ++i) {
      float* o = out + i * BT;
      const int keep = i + (with_aqk ? 1 : 0);  // aqk keeps the diagonal, L is strictly lower
      if (!with_aqk) vscale(-b.beta[i], o, o, std::min(keep, cols));
      if (cols > keep) vfill(o + keep, 0.0f, cols - keep);
    }
    if (!diag_safe_[sc]) kda_diag_fwd_exact(s0, s0 + m, with_aqk);
  }
}

void Worker::kda_diag_fwd_exact(int s0, int s1, bool with_aqk) {
  const int K = K_, BT = BT_;
  WorkerBufs& b = b_;
  const float* src = with_aqk ? b.q : b.k;
  float* out = with_aqk ? b.aqk : b.Ln;
  float* R = b.z;
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

void Worker::kda_intra_bwd(int n) {
  const int K = K_, BT = BT_;
  WorkerBufs& b = b_;
  std::memset(b.dka, 0, sizeof(float) * n * K);
  std::memset(b.r, 0, sizeof(float) * n * K);
  for (int i = 0; i < n; ++i) vfill(b.daqk + i * BT + i + 1, 0.0f, n - i - 1);  // G lower
  for (int s0 = 0, sc = 0; s0 < n; s0 += kBC, ++sc) {
    const int m = std::min(n - s0, kBC);
    const int cols = kda_columns(sc, s0, m);
    if (cols > 0) {
      // Row side: [G; H]_s col (2m x K), then rho_i into dq_i and r'_i.
      mm(m, K, cols, b.daqk + s0 * BT, BT, 1, b.col, K, b.zo, K, false);
      mm(m, K, cols, b.dL + s0 * BT, BT, 1, b.col, K, b.zo + m * K, K, false);
      for (int i = 0; i < m; ++i) {
        const float* rh = b.rho + (s0 + i) * K;
        float* dq = b.dq + (s0 + i) * K;
        float* r = b.r + (s0 + i) * K;
        const float* z0 = b.zo + i * K;
        const float* z1 = b.zo + (m + i) * K;
        for (int d = 0; d < K; d += kW) {
          const Tail t = tail_of(K - d);
          const VF f = load(rh + d, t);
          store(dq + d, fma(f, load(z0 + d, t), load(dq + d, t)), t);
          store(r + d, fma(f, load(z1 + d, t), load(r + d, t)), t);
        }
      }
      // Column side: G^T (q rho)_s + H^T (beta k rho)_s, then colfac_j into dka_j.
      mm(cols, K, m, b.daqk + s0 * BT, 1, BT, b.qr + s0 * K, K, b.zc, K, false);
      mm(cols, K, m, b.dL + s0 * BT, 1, BT, b.bkr + s0 * K, K, b.zc, K, true);
      for (int j = 0; j < cols; ++j) {
        const float* cf = b.colfac + j * K;
        float* dka = b.dka + j * K;
        const float* z = b.zc + j * K;
        for (int d = 0; d < K; d += kW) {
          const Tail t = tail_of(K - d);
          store(dka + d, fma(load(cf + d, t), load(z + d, t), load(dka + d, t)), t);
        }
      }
    }
    if (!diag_safe_[sc]) kda_diag_bwd_exact(s0, s0 + m);
  }
  for (int i = 0; i < n; ++i) {
    b.dbeta[i] += vdot(b.k + i * K, b.r + i * K, K);
    vscale(b.beta[i], b.r + i * K, b.r + i * K, K);
  }
}

void Worker::kda_diag_bwd_exact(int s0, int s1) {
  const int K = K_, BT = BT_;
  WorkerBufs& b = b_;
  float* e = b.z;
  float* acc = b.z + K;
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

}  // namespace linattn::cpu::bwd

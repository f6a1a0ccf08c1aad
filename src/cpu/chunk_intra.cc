// Intra-chunk matrices of the chunked forward (see chunk_work.h):
//   Ln_ij = -beta_i D_ij (k_i . k_j) for j < i,  P_ij = scale D_ij (q_i . k_j) for j <= i,
// with D_ij = e^{gamma_i - gamma_j} (GDN) or channelwise inside the dot (KDA).
// GDN: K K^T and Q K^T as triangular GEMMs, then D from the cumulative gate; masked lanes are
// selected away before the exponential, never multiplied by 0 (no inf * 0).
// KDA: every decay factor is a running product of a_t = e^{g_t} <= 1 (no e^{+gamma}, safe for
// gates of -1000): rows of sub-chunk r are scaled to its first row n_r, columns of sub-chunk c to
// its last row e_c, and the pair factor e^{gamma_{n_r} - gamma_{e_c}} joins them, so sub-chunk
// pairs are GEMMs; the diagonal 16 x 16 sub-chunks pair row by row with a running product.
#include <algorithm>

#include "cpu/chunk_work.h"
#include "cpu/gemm.h"
#include "cpu/gemm_bf16.h"
#include "cpu/simd.h"

namespace linattn::cpu {
namespace {

using namespace simd;
constexpr int kBC = 16;  // KDA sub-chunk (a multiple of the vector width)

inline Tail tail_of(int64_t rem) { return tail_mask(static_cast<int>(rem < kW ? rem : kW)); }

// dst = a (.) b over K values.
inline void vmul(const float* a, const float* b, float* dst, int64_t K) {
  for (int64_t d = 0; d < K; d += kW) {
    const Tail t = tail_of(K - d);
    store(dst + d, mul(load(a + d, t), load(b + d, t)), t);
  }
}

inline void vfill(float* dst, float x, int64_t K) {
  for (int64_t d = 0; d < K; d += kW) store(dst + d, set1(x), tail_of(K - d));
}

inline float vdot(const float* a, const float* b, int64_t K) {
  VF acc = zero();
  for (int64_t d = 0; d < K; d += kW) {
    const Tail t = tail_of(K - d);
    acc = fma(load(a + d, t), load(b + d, t), acc);
  }
  return hsum(acc);
}


// One row i of a diagonal sub-chunk: pr[j] = scale * q_i . (k_j (.) E_ij) and
// lr[j] = -beta_i k_i . (k_j (.) E_ij) for j in [s, i] (lr[i] unused), E_ij = prod_{t=j+1..i} a_t.
// NV vectors of K live in registers (K <= NV * kW); the generic version walks memory.
template <int NV>
void diag_row_reg(int64_t K, const ChunkWork& w, int i, int s, float scale, float* pr, float* lr) {
  VF rq[NV], rk[NV];
  Tail t[NV];
  for (int v = 0; v < NV; ++v) {
    t[v] = tail_of(K - v * kW);
    rq[v] = load(w.Qc + i * w.ldk + v * kW, t[v]);
    rk[v] = load(w.Kc + i * w.ldk + v * kW, t[v]);
  }
  {
    VF acc = zero();
    for (int v = 0; v < NV; ++v) acc = fma(rq[v], rk[v], acc);
    pr[i] = scale * hsum(acc);
  }
  const float nbeta = -w.beta[i];
  for (int j = i - 1; j >= s; --j) {
    const float* a = w.Ag + (j + 1) * w.ldk;
    const float* kj = w.Kc + j * w.ldk;
    VF aq0 = zero(), aq1 = zero(), ak0 = zero(), ak1 = zero();
    for (int v = 0; v < NV; ++v) {
      const VF av = load(a + v * kW, t[v]), kv = load(kj + v * kW, t[v]);
      rq[v] = mul(rq[v], av);
      rk[v] = mul(rk[v], av);
      if (v % 2 == 0) {
        aq0 = fma(rq[v], kv, aq0);
        ak0 = fma(rk[v], kv, ak0);
      } else {
        aq1 = fma(rq[v], kv, aq1);
        ak1 = fma(rk[v], kv, ak1);
      }
    }
    pr[j] = scale * hsum(add(aq0, aq1));
    lr[j] = nbeta * hsum(add(ak0, ak1));
  }
}

void diag_row_mem(int64_t K, const ChunkWork& w, int i, int s, float scale, float* pr, float* lr) {
  float* Rq = w.Z;
  float* Rk = w.Z + w.ldk;
  std::copy(w.Qc + i * w.ldk, w.Qc + i * w.ldk + K, Rq);
  std::copy(w.Kc + i * w.ldk, w.Kc + i * w.ldk + K, Rk);
  pr[i] = scale * vdot(Rq, w.Kc + i * w.ldk, K);
  const float nbeta = -w.beta[i];
  for (int j = i - 1; j >= s; --j) {
    vmul(Rq, w.Ag + (j + 1) * w.ldk, Rq, K);
    vmul(Rk, w.Ag + (j + 1) * w.ldk, Rk, K);
    pr[j] = scale * vdot(Rq, w.Kc + j * w.ldk, K);
    lr[j] = nbeta * vdot(Rk, w.Kc + j * w.ldk, K);
  }
}

void diag_row(int nvk, int64_t K, const ChunkWork& w, int i, int s, float scale, float* pr, float* lr) {
  switch (nvk) {
    case 1: return diag_row_reg<1>(K, w, i, s, scale, pr, lr);
    case 2: return diag_row_reg<2>(K, w, i, s, scale, pr, lr);
    case 3: return diag_row_reg<3>(K, w, i, s, scale, pr, lr);
    case 4: return diag_row_reg<4>(K, w, i, s, scale, pr, lr);
    case 5: return diag_row_reg<5>(K, w, i, s, scale, pr, lr);
    case 6: return diag_row_reg<6>(K, w, i, s, scale, pr, lr);
    case 7: return diag_row_reg<7>(K, w, i, s, scale, pr, lr);
    case 8: return diag_row_reg<8>(K, w, i, s, scale, pr, lr);
    default: return diag_row_mem(K, w, i, s, scale, pr, lr);
  }
}

}  // namespace

void gdn_intra(const ChunkWork& w, int n, float scale) {
  const int BT = w.BT;
  const int K = static_cast<int>(w.K);
  // [K; Q] K^T in one full GEMM: the triangular halves alone would run as narrow, load-bound
  // micro-tiles; computing the upper part too is cheaper.
  if (w.bf16) {
    const int Kp = static_cast<int>((K + 1) / 2);
    transpose_u32(n, Kp, w.KQ2, w.ldk2, w.KT2, BT);
    GemmBf16Args g;
    g.N = n;
    g.Kp = Kp;
    g.A = w.KQ2;
    g.a_rs = w.ldk2;
    g.B = w.KT2;
    g.ldb = BT;
    g.C = w.Ln;
    g.ldc = BT;
    gemm_bf16_stacked(g, n, BT, BT * w.ldk2, BT * BT);
  } else {
    transpose(n, K, w.Kc, w.ldk, w.KT, BT);
    GemmArgs g;
    g.N = n;
    g.Kd = K;
    g.A = w.Kc;
    g.a_rs = w.ldk;
    g.B = w.KT;
    g.ldb = BT;
    g.C = w.Ln;
    g.ldc = BT;
    gemm_stacked(g, n, BT, BT * w.ldk, BT * BT);
  }
  const VF ninf = set1(-INFINITY), zv = zero();
  for (int i = 0; i < n; ++i) {
    float* l = w.Ln + i * BT;
    float* pr = w.P + i * BT;
    const VF gi = set1(w.gam[i]), fi = set1(static_cast<float>(i));
    const VF nb = set1(-w.beta[i]), sc = set1(scale);
    for (int j0 = 0; j0 < n; j0 += kW) {
      const Tail t = tail_of(n - j0);
      const VF jv = add(iota(), set1(static_cast<float>(j0)));
      const VF arg = select_gt(jv, fi, ninf, sub(gi, load(w.gam + j0, t)));
      const VF d = exp(arg);  // 0 above the diagonal
      store(pr + j0, select_gt(jv, fi, zv, mul(mul(sc, d), load(pr + j0, t))), t);
      store(l + j0, select_lt(jv, fi, mul(mul(nb, d), load(l + j0, t)), zv), t);
    }
  }
}

void kda_intra(const ChunkWork& w, int n, float scale) {
  const int BT = w.BT;
  const int64_t K = w.K, ldk = w.ldk;
  auto row = [ldk](float* base, int i) { return base + i * ldk; };
  // Whole-chunk running products: e^{gamma_i} (Kg, Qg) and e^{gamma_last - gamma_i} (Kd).
  float* cum = w.xv;
  vfill(cum, 1.0f, K);
  for (int i = 0; i < n; ++i) {
    vmul(cum, row(w.Ag, i), cum, K);
    vmul(row(w.Kc, i), cum, row(w.Kg, i), K);
    vmul(row(w.Qc, i), cum, row(w.Qg, i), K);
  }
  std::copy(cum, cum + K, w.el);
  vfill(cum, 1.0f, K);
  for (int i = n - 1; i >= 0; --i) {
    vmul(row(w.Kc, i), cum, row(w.Kd, i), K);
    vmul(cum, row(w.Ag, i), cum, K);
  }
  // Sub-chunk relative factors: rows to their sub-chunk start, columns to their sub-chunk end.
  const int nb = (n + kBC - 1) / kBC;
  for (int r = 0; r < nb; ++r) {
    const int s = r * kBC, e = std::min(n, s + kBC) - 1;
    vfill(cum, 1.0f, K);
    for (int i = s; i <= e; ++i) {
      if (i > s) vmul(cum, row(w.Ag, i), cum, K);
      vmul(row(w.Qc, i), cum, row(w.Qr, i), K);
      vmul(row(w.Kc, i), cum, row(w.Kr, i), K);
    }
    vfill(cum, 1.0f, K);
    for (int j = e; j >= s; --j) {
      vmul(row(w.Kc, j), cum, row(w.K2, j), K);
      vmul(cum, row(w.Ag, j), cum, K);
    }
    std::copy(cum, cum + K, w.bp + r * ldk);  // product of a_t over the sub-chunk
  }
  transpose(n, static_cast<int>(K), w.K2, ldk, w.KT, BT);
  // Off-diagonal sub-chunk pairs (r > c). For row sub-chunk r, the columns of every earlier
  // sub-chunk c are K''_c^T scaled per channel by x_rc = e^{gamma_{n_r} - gamma_{e_c}}
  // (x_{r,r-1} = a_{n_r}, x_{r,c-1} = x_{r,c} (.) prod_c), gathered into Br [K, s]; then one GEMM
  // per row sub-chunk for Q and one for K writes P / Ln columns [0, s) directly.
  float* x = w.xv;
  for (int r = 1; r < nb; ++r) {
    const int s = r * kBC, rows = std::min(n - s, kBC);
    std::copy(row(w.Ag, s), row(w.Ag, s) + K, x);  // x_{r, r-1} = a_{n_r}
    for (int c = r - 1; c >= 0; --c) {
      if (c < r - 1) vmul(x, w.bp + (c + 1) * ldk, x, K);
      for (int64_t d = 0; d < K; ++d) {
        const VF xd = set1(x[d]);
        const float* src = w.KT + d * BT + c * kBC;
        float* dst = w.Br + d * BT + c * kBC;
        for (int jj = 0; jj < kBC; jj += kW) store(dst + jj, mul(xd, load(src + jj)));
      }
    }
    GemmArgs g;
    g.M = rows;
    g.N = s;
    g.Kd = static_cast<int>(K);
    g.A = row(w.Qr, s);
    g.a_rs = ldk;
    g.B = w.Br;
    g.ldb = BT;
    g.C = w.P + s * BT;
    g.ldc = BT;
    gemm(g);
    g.A = row(w.Kr, s);
    g.C = w.Ln + s * BT;
    gemm(g);
    for (int i = 0; i < rows; ++i) {
      const VF sc = set1(scale), nbeta = set1(-w.beta[s + i]);
      float* pr = w.P + (s + i) * BT;
      float* lr = w.Ln + (s + i) * BT;
      for (int jj = 0; jj < s; jj += kW) {
        store(pr + jj, mul(sc, load(pr + jj)));
        store(lr + jj, mul(nbeta, load(lr + jj)));
      }
    }
  }
  // Diagonal sub-chunks: for each row i, walk j = i, i-1, ... down to the sub-chunk start with
  // running products Rq = q_i (.) e^{gamma_i - gamma_j}, Rk likewise (held in registers).
  const int nvk = static_cast<int>((K + kW - 1) / kW);
  for (int r = 0; r < nb; ++r) {
    const int s = r * kBC, e = std::min(n, s + kBC) - 1;
    for (int i = s; i <= e; ++i) {
      float* pr = w.P + i * BT;
      float* lr = w.Ln + i * BT;
      diag_row(nvk, K, w, i, s, scale, pr, lr);
      std::fill(pr + i + 1, pr + n, 0.0f);
      std::fill(lr + i, lr + n, 0.0f);
    }
  }
}

}  // namespace linattn::cpu

// Register-blocked micro-kernels behind gemm() and trsm_unit_lower() (see gemm.h).
// Template parameters: rows MR (1..6), vectors NV (1..4), TAIL = last vector partial.
#include "cpu/gemm.h"

#include <algorithm>

#include "cpu/simd.h"

namespace linattn::cpu {
namespace {

using namespace simd;
constexpr int kMR = 6;
constexpr int kNV = 4;

template <int MR, int NV, bool TAIL>
void gemm_micro(const GemmArgs& g, int r0, int c0, int kd, Tail t) {
  VF acc[MR][NV];
  float* Cb = g.C + r0 * g.ldc + c0;
  for (int r = 0; r < MR; ++r) {
    if (g.accumulate) {
      const VF s = set1(g.c_row_scale ? g.c_row_scale[r0 + r] : g.c_scale);
      for (int c = 0; c < NV; ++c)
        acc[r][c] = mul(TAIL && c == NV - 1 ? load(Cb + r * g.ldc + c * kW, t) : load(Cb + r * g.ldc + c * kW), s);
    } else {
      for (int c = 0; c < NV; ++c) acc[r][c] = zero();
    }
  }
  const float* Ab = g.A + r0 * g.a_rs;
  const float* Bb = g.B + c0;
  for (int k = 0; k < kd; ++k) {
    VF b[NV];
    const float* Bk = Bb + k * g.ldb;
    for (int c = 0; c < NV; ++c) b[c] = TAIL && c == NV - 1 ? load(Bk + c * kW, t) : load(Bk + c * kW);
    const float* Ak = Ab + k * g.a_ks;
    for (int r = 0; r < MR; ++r) {
      const VF a = set1(Ak[r * g.a_rs]);
      for (int c = 0; c < NV; ++c) acc[r][c] = fma(a, b[c], acc[r][c]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NV; ++c) {
      if (TAIL && c == NV - 1) store(Cb + r * g.ldc + c * kW, acc[r][c], t);
      else store(Cb + r * g.ldc + c * kW, acc[r][c]);
    }
}

struct TrsmArgs {
  const float* Ln;
  int64_t ldl;
  float* X;
  int64_t ldx;
};

template <int MR, int NV, bool TAIL>
void trsm_micro(const TrsmArgs& a, int r0, int c0, int, Tail t) {
  VF acc[MR][NV];
  float* Xb = a.X + c0;
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NV; ++c) {
      const float* p = Xb + (r0 + r) * a.ldx + c * kW;
      acc[r][c] = TAIL && c == NV - 1 ? load(p, t) : load(p);
    }
  for (int k = 0; k < r0; ++k) {  // rows already solved
    VF b[NV];
    for (int c = 0; c < NV; ++c) {
      const float* p = Xb + k * a.ldx + c * kW;
      b[c] = TAIL && c == NV - 1 ? load(p, t) : load(p);
    }
    for (int r = 0; r < MR; ++r) {
      const VF l = set1(a.Ln[(r0 + r) * a.ldl + k]);
      for (int c = 0; c < NV; ++c) acc[r][c] = fma(l, b[c], acc[r][c]);
    }
  }
  for (int s = 0; s < MR; ++s)  // the diagonal block, in registers
    for (int r = s + 1; r < MR; ++r) {
      const VF l = set1(a.Ln[(r0 + r) * a.ldl + r0 + s]);
      for (int c = 0; c < NV; ++c) acc[r][c] = fma(l, acc[s][c], acc[r][c]);
    }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NV; ++c) {
      float* p = Xb + (r0 + r) * a.ldx + c * kW;
      if (TAIL && c == NV - 1) store(p, acc[r][c], t);
      else store(p, acc[r][c]);
    }
}

// Table of instantiations [MR - 1][NV - 1][TAIL].
template <class Args, template <int, int, bool> class F>
struct Table;

template <int MR, int NV, bool TAIL>
struct GemmFn {
  static void run(const GemmArgs& g, int r0, int c0, int kd, Tail t) { gemm_micro<MR, NV, TAIL>(g, r0, c0, kd, t); }
};
template <int MR, int NV, bool TAIL>
struct TrsmFn {
  static void run(const TrsmArgs& g, int r0, int c0, int kd, Tail t) { trsm_micro<MR, NV, TAIL>(g, r0, c0, kd, t); }
};

template <class Args, template <int, int, bool> class F>
struct Table {
  using Fn = void (*)(const Args&, int, int, int, Tail);
  Fn fns[kMR][kNV][2];
  template <int MR, int NV>
  constexpr void fill_one() {
    fns[MR - 1][NV - 1][0] = &F<MR, NV, false>::run;
    fns[MR - 1][NV - 1][1] = &F<MR, NV, true>::run;
  }
  template <int MR>
  constexpr void fill_row() {
    fill_one<MR, 1>();
    fill_one<MR, 2>();
    fill_one<MR, 3>();
    fill_one<MR, 4>();
  }
  constexpr Table() : fns{} {
    fill_row<1>();
    fill_row<2>();
    fill_row<3>();
    fill_row<4>();
    fill_row<5>();
    fill_row<6>();
  }
};

const Table<GemmArgs, GemmFn> kGemmTable;
const Table<TrsmArgs, TrsmFn> kTrsmTable;

}  // namespace

void gemm(const GemmArgs& g) {
  constexpr int kNR = kNV * kW;
  for (int c0 = 0; c0 < g.N; c0 += kNR) {
    const int ncols = std::min(kNR, g.N - c0);
    for (int r0 = 0; r0 < g.M; r0 += kMR) {
      const int mr = std::min(kMR, g.M - r0);
      int nc = ncols;
      if (g.n_tri) {
        const int lim = r0 + mr + g.n_diag - c0;
        if (lim <= 0) continue;
        nc = std::min(nc, lim);
      }
      const int kd = g.k_tri ? std::clamp(r0 + mr + g.k_diag, 0, g.Kd) : g.Kd;
      const int nv = (nc + kW - 1) / kW;
      const int rem = nc % kW;
      kGemmTable.fns[mr - 1][nv - 1][rem != 0](g, r0, c0, kd, tail_mask(rem));
    }
  }
}

void trsm_unit_lower(int n, int N, const float* Ln, int64_t ldl, float* X, int64_t ldx) {
  constexpr int kNR = kNV * kW;
  const TrsmArgs a{Ln, ldl, X, ldx};
  for (int c0 = 0; c0 < N; c0 += kNR) {
    const int nc = std::min(kNR, N - c0);
    const int nv = (nc + kW - 1) / kW;
    const int rem = nc % kW;
    for (int r0 = 0; r0 < n; r0 += kMR) {
      const int mr = std::min(kMR, n - r0);
      kTrsmTable.fns[mr - 1][nv - 1][rem != 0](a, r0, c0, 0, tail_mask(rem));
    }
  }
}

void transpose(int R, int C, const float* src, int64_t lds, float* dst, int64_t ldd) {
  constexpr int kB = 8;
  for (int r0 = 0; r0 < R; r0 += kB)
    for (int c0 = 0; c0 < C; c0 += kB) {
      const int r1 = std::min(R, r0 + kB), c1 = std::min(C, c0 + kB);
      for (int r = r0; r < r1; ++r)
        for (int c = c0; c < c1; ++c) dst[c * ldd + r] = src[r * lds + c];
    }
}

}  // namespace linattn::cpu

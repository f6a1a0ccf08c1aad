// Register-blocked micro-kernels behind gemm() and trsm_unit_lower() (see gemm.h).
// Template parameters: rows MR (1..6), vectors NV (1..4), TAIL = last vector partial.
#include "cpu/intrin.h"
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

#if defined(__AVX512F__)
namespace {
// 16 x 16 block: rows of src -> columns of dst, in registers (unpack 32-bit, 64-bit, then
// 128-bit lane shuffles twice).
void transpose16(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
  }
  // r[4b + j] holds, for row group b (rows 4b..4b+3), column j + 4 * (128-bit lane).
  for (int j = 0; j < 4; ++j) {
    t[j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);        // lanes 0,2 of group 0 | 0,2 of group 1
    t[4 + j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);    // lanes 1,3 ...
    t[8 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    t[12 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);         // column j
    r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);     // column j + 8
    r[4 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0x88);  // column j + 4
    r[12 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0xdd); // column j + 12
  }
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * ldd, r[i]);
}
}  // namespace
#endif

void transpose(int R, int C, const float* src, int64_t lds, float* dst, int64_t ldd) {
  int r_full = 0, c_full = 0;
#if defined(__AVX512F__)
  r_full = R / 16 * 16;
  c_full = C / 16 * 16;
  for (int r0 = 0; r0 < r_full; r0 += 16)
    for (int c0 = 0; c0 < c_full; c0 += 16) transpose16(src + r0 * lds + c0, lds, dst + c0 * ldd + r0, ldd);
#endif
  auto scalar = [&](int r0, int r1, int c0, int c1) {
    for (int r = r0; r < r1; ++r)
      for (int c = c0; c < c1; ++c) dst[c * ldd + r] = src[r * lds + c];
  };
  scalar(0, r_full, c_full, C);  // right strip
  scalar(r_full, R, 0, C);       // bottom strip
}

}  // namespace linattn::cpu

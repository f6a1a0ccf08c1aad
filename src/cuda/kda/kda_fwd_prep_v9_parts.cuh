// Gate-phase pieces of KDA prep v9 (kda_fwd_prep_v8_body.cuh with kV9; perf-notes "Prep v9"): the
// per-channel gate formed directly in log2 units (g log2 e, the unit of gam), so the cumsum needs no
// rescale, softplus loses its x > 20 select (exact: there 1 + 2^-|y| rounds to 1) and the bias add and
// log2 e scale fuse into one FFMA; the form's per-head constants and beta are loaded before the chunk
// table chain / with the gate loads instead of after them. Same stability rules as v8: every exponent
// formed here is the gate's own (ex2 of -|y|, or of the lower_bound sigmoid's argument: inf gives 0
// through the fast divide); rows past the chunk's end are never read (raw 0) and, unlike v8, not masked
// after the form: they get the finite gate of a raw 0, which only reaches gam rows >= len (the cumsum is
// a prefix sum), and those rows' products are dropped by selects downstream (invalid rows of L / P, zero
// q / k operands, gated operands not stored; a valid left token's reference row n >= len pairs only with
// right tokens >= n).
#pragma once
#include "cuda/kda/kda_fwd_prep_v6_parts.cuh"

namespace linattn::cuda {
namespace {

// Per-(value head, channel pair) inputs of the in-kernel gate form, raw (loaded before chunk_span so
// their latency overlaps the chunk table loads; the expf of A_log is taken in gate_form_l2).
struct GateL2In {
  float dta, dtb, alog;
};

__device__ __forceinline__ GateL2In gate_l2_in(const GdnFwdParams& p, int j, int ch) {
  GateL2In c{0.f, 0.f, 0.f};
  if (p.gate_in_kernel) {
    if (p.dt_bias) c.dta = p.dt_bias[j * kK + ch], c.dtb = p.dt_bias[j * kK + ch + 1];
    if (p.A_log) c.alog = p.A_log[j];
  }
  return c;
}

// ga / gb (raw gates, 0 past the chunk's end) -> g log2 e (no row mask: see the top).
//   softplus: -ea log2(1 + e^x) = -ea (max(y, 0) + lg2(1 + 2^-|y|)), y = x log2 e = fma(g, log2 e, d log2 e)
//   lower_bound: lb log2 e / (1 + 2^(-ea log2 e (g + d)))   (fast divide: denominator >= 1, inf gives 0)
//   no in-kernel gate: g log2 e
template <int R>
__device__ __forceinline__ void gate_form_l2(const GdnFwdParams& p, const GateL2In& c, float (&ga)[R],
                                             float (&gb)[R]) {
  if (!p.gate_in_kernel) {
#pragma unroll
    for (int e = 0; e < R; ++e) ga[e] *= kLog2e, gb[e] *= kLog2e;
    return;
  }
  const float ea = p.A_log ? expf(c.alog) : 1.f;
  auto form = [&](float (&gv)[R], float d) {
    if (p.has_lower_bound) {
      const float m = -ea * kLog2e, lb = p.lower_bound * kLog2e, md = m * d;
#pragma unroll
      for (int e = 0; e < R; ++e) {
        gv[e] = __fdividef(lb, 1.f + ex2_ftz(fmaf(gv[e], m, md)));
      }
    } else {
      const float d2 = d * kLog2e;
#pragma unroll
      for (int e = 0; e < R; ++e) {
        const float y = fmaf(gv[e], kLog2e, d2);
        float l2;
        asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(l2) : "f"(1.f + ex2_ftz(-fabsf(y))));
        gv[e] = -ea * (fmaxf(y, 0.f) + l2);
      }
    }
  };
  form(ga, c.dta);
  form(gb, c.dtb);
}

// gdn_beta split in two: the raw load (issued with the gate loads) and the form (as gdn_beta).
__device__ __forceinline__ float beta_form(const GdnFwdParams& p, float b) {
  if (p.beta_sigmoid) {
    b = 1.f / (1.f + expf(-b));
    if (p.neg_eigval) b *= 2.f;
  }
  return b;
}

}  // namespace
}  // namespace linattn::cuda

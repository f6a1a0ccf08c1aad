// Driver of the CPU chunked forward (see chunk_fwd.h): scratch carving, the longest-first task
// queue, and the per-chunk step shared by GDN and KDA (the gate policy only changes the factors
// built in chunk_intra.cc and which scales the shared products take).
#include "cpu/chunk_fwd.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "core/util.h"
#include "cpu/chunk_fwd_seg.h"
#include "cpu/chunk_prep.h"
#include "cpu/chunk_work.h"
#include "cpu/gemm.h"
#include "cpu/gemm_bf16.h"
#include "cpu/simd.h"
#include "cpu/state_io.h"

namespace linattn::cpu {
namespace {

using namespace simd;
constexpr int64_t kAlign = 16;  // floats (64 bytes)

int64_t split_width(const ChunkParams& p, const ChunkSchedule& s) {
  return s.v_splits > 1 && s.v_tile > 0 ? s.v_tile : p.V;
}

// Walks the buffer list once: with base == nullptr it only counts.
int64_t layout(const ChunkParams& p, int64_t vt_max, bool bf16, float* base, ChunkWork* w) {
  const int64_t BT = p.BT, ldk = round_up(p.K, kW), ldv = round_up(vt_max, kW);
  int64_t off = 0;
  auto take = [&](float** dst, int64_t count) {
    if (base) *dst = base + off;
    off += round_up(count, kAlign);
  };
  ChunkWork tmp;
  ChunkWork& c = w ? *w : tmp;
  c.K = p.K;
  c.vt = vt_max;
  c.ldk = ldk;
  c.ldv = ldv;
  c.BT = p.BT;
  take(&c.S, p.K * ldv);
  take(&c.Kc, 2 * BT * ldk);
  c.Qc = c.Kc ? c.Kc + BT * ldk : nullptr;
  take(&c.KT, ldk * BT);
  take(&c.X, BT * ldv);
  take(&c.KS, 2 * BT * ldv);
  c.QS = c.KS ? c.KS + BT * ldv : nullptr;
  take(&c.Ln, 2 * BT * BT);
  c.P = c.Ln ? c.Ln + BT * BT : nullptr;
  take(&c.beta, BT);
  take(&c.gam, BT);
  take(&c.rs, BT);
  take(&c.rd, BT);
  if (p.kda) {
    take(&c.Kg, 2 * BT * ldk);
    c.Qg = c.Kg ? c.Kg + BT * ldk : nullptr;
    for (float** b : {&c.Ag, &c.Kd, &c.Qr, &c.Kr, &c.K2}) take(b, BT * ldk);
    take(&c.Z, 32 * ldk);
    take(&c.ZO, 32 * 16);
    take(&c.xv, ldk);
    take(&c.el, ldk);
    take(&c.bp, (BT / 8) * ldk);
    take(&c.Br, ldk * BT);
  }
  c.bf16 = bf16;
  if (bf16) {
    const int64_t ldk2 = round_up((p.K + 1) / 2, kW), half = (BT + 1) / 2;
    c.ldk2 = ldk2;
    auto take_u32 = [&](uint32_t** dst, int64_t count) {
      float* f = nullptr;
      take(&f, count);
      if (base) *dst = reinterpret_cast<uint32_t*>(f);
    };
    take_u32(&c.KQ2, 2 * BT * ldk2);
    take_u32(&c.S2, ldk2 * ldv);
    take_u32(&c.KT2, ldk2 * BT);
    take_u32(&c.U2, half * ldk);
    take_u32(&c.X2, half * ldv);
  }
  return off;
}

}  // namespace

// Loads rows [t0, t0 + n) of q, k, v (columns [v0, v0 + vt)), beta and the gate.
void prep_rows(const ChunkParams& p, const ChunkWork& w, int64_t t0, int n, int64_t j, int64_t v0) {
  const int64_t h = j / p.G;
  for (int i = 0; i < n; ++i) {
    const int64_t t = t0 + i;
    prep_qk(p, t, h, w.Qc + i * w.ldk, w.Kc + i * w.ldk);
    w.beta[i] = prep_beta(p, t, j);
    load_row(p.v, p.v_dtype, (t * p.HV + j) * p.V + v0, w.vt, w.X + i * w.ldv);
    if (p.kda) {
      float* a = w.Ag + i * w.ldk;
      prep_gate_vec(p, t, j, a);
      for (int64_t d = 0; d < p.K; d += kW) {
        const Tail tm = tail_mask(static_cast<int>(std::min<int64_t>(kW, p.K - d)));
        store(a + d, exp(load(a + d, tm)), tm);
      }
    } else {
      w.gam[i] = (i ? w.gam[i - 1] : 0.0f) + prep_gate_scalar(p, t, j);
    }
  }
  if (!p.kda) {
    const VF last = set1(w.gam[n - 1]);
    for (int i = 0; i < n; i += kW) {
      const Tail tm = tail_mask(std::min(kW, n - i));
      const VF g = load(w.gam + i, tm);
      store(w.rs + i, exp(g), tm);
      store(w.rd + i, exp(sub(last, g)), tm);
    }
  }
}

void state_read(const ChunkWork& w, int n, int K, int ncols, const float* kq, bool stacked) {
  if (w.bf16) {  // operands rounded for the product only
    pack_bf16_rows(n, K, kq, w.ldk, w.KQ2, w.ldk2);
    pack_bf16_rows(n, K, kq + w.BT * w.ldk, w.ldk, w.KQ2 + w.BT * w.ldk2, w.ldk2);
    pack_bf16_row_pairs(K, ncols, w.S, w.ldv, w.S2, w.ldv);
    GemmBf16Args b;
    b.M = n;
    b.N = ncols;
    b.Kp = (K + 1) / 2;
    b.A = w.KQ2;
    b.a_rs = w.ldk2;
    b.B = w.S2;
    b.ldb = w.ldv;
    b.C = w.KS;
    b.ldc = w.ldv;
    if (stacked) gemm_bf16_stacked(b, n, w.BT, w.BT * w.ldk2, w.BT * w.ldv);
    else gemm_bf16(b);
  } else {
    GemmArgs g;
    g.M = n;
    g.N = ncols;
    g.Kd = K;
    g.A = kq;
    g.a_rs = w.ldk;
    g.B = w.S;
    g.ldb = w.ldv;
    g.C = w.KS;
    g.ldc = w.ldv;
    if (stacked) gemm_stacked(g, n, w.BT, w.BT * w.ldk, w.BT * w.ldv);
    else gemm(g);
  }
}

void state_update(const ChunkWork& w, int n, int K, int ncols, const float* ku, float c_scale,
                  const float* c_rows) {
  if (w.bf16) {
    pack_bf16_row_pairs(n, K, ku, w.ldk, w.U2, w.ldk);
    pack_bf16_row_pairs(n, ncols, w.X, w.ldv, w.X2, w.ldv);
    GemmBf16Args b;
    b.M = K;
    b.N = ncols;
    b.Kp = (n + 1) / 2;
    b.A = w.U2;
    b.a_rs = 1;
    b.a_ks = w.ldk;
    b.B = w.X2;
    b.ldb = w.ldv;
    b.C = w.S;
    b.ldc = w.ldv;
    b.accumulate = true;
    b.c_scale = c_scale;
    b.c_row_scale = c_rows;
    gemm_bf16(b);
  } else {
    GemmArgs g;
    g.M = K;
    g.N = ncols;
    g.Kd = n;
    g.A = ku;
    g.a_rs = 1;
    g.a_ks = w.ldk;
    g.B = w.X;
    g.ldb = w.ldv;
    g.C = w.S;
    g.ldc = w.ldv;
    g.accumulate = true;
    g.c_scale = c_scale;
    g.c_row_scale = c_rows;
    gemm(g);
  }
}

namespace {

// Software prefetch of the next chunk's input rows. A value head's rows are H*K (or HV*V)
// elements apart, a page or more, so the hardware prefetchers miss them; the rows are requested
// in four slices spread over the current chunk's phases, toward L2.
struct RowPrefetch {
  struct Src {
    const char* base;
    int64_t stride, bytes;
  };
  Src src[5];
  int nsrc = 0, rows = 0, next = 0;

  RowPrefetch(const ChunkParams& p, int64_t t1, int64_t eos, int64_t j, int64_t v0, int64_t vt) {
    if (t1 >= eos) return;
    rows = static_cast<int>(std::min<int64_t>(p.BT, eos - t1));
    const int64_t h = j / p.G, eq = dtype_size(p.qk_dtype), ev = dtype_size(p.v_dtype);
    const int64_t eg = dtype_size(p.g_dtype), eb = dtype_size(p.beta_dtype), gw = p.kda ? p.K : 1;
    auto add = [&](const void* base, int64_t off, int64_t stride, int64_t bytes) {
      src[nsrc++] = {static_cast<const char*>(base) + off, stride, bytes};
    };
    add(p.q, (t1 * p.H + h) * p.K * eq, p.H * p.K * eq, p.K * eq);
    add(p.k, (t1 * p.H + h) * p.K * eq, p.H * p.K * eq, p.K * eq);
    add(p.v, ((t1 * p.HV + j) * p.V + v0) * ev, p.HV * p.V * ev, vt * ev);
    add(p.g, (t1 * p.HV + j) * gw * eg, p.HV * gw * eg, gw * eg);
    add(p.beta, (t1 * p.HV + j) * eb, p.HV * eb, eb);
  }
  void issue_slice() {  // a quarter of the rows
    const int end = std::min(rows, next + (rows + 3) / 4);
    for (; next < end; ++next)
      for (int s = 0; s < nsrc; ++s) {
        const char* row = src[s].base + next * src[s].stride;
        for (int64_t b = 0; b < src[s].bytes; b += 64) prefetch_l2(row + b);
        prefetch_l2(row + src[s].bytes - 1);
      }
  }
};

void chunk_step(const ChunkParams& p, const ChunkWork& w, int64_t t0, int n, int64_t j, int64_t v0,
                int64_t eos) {
  RowPrefetch pf(p, t0 + p.BT, eos, j, v0, w.vt);
  prep_rows(p, w, t0, n, j, v0);
  pf.issue_slice();
  const int vt = static_cast<int>(w.vt), K = static_cast<int>(p.K);
  if (p.kda) kda_intra(w, n, p.scale);
  // GEMM-first: (gated) K S and Q S read the state before it is overwritten.
  state_read(w, n, K, vt, p.kda ? w.Kg : w.Kc, true);
  pf.issue_slice();
  if (!p.kda) gdn_intra(w, n, p.scale);
  // X = beta (V - e^gamma K S)   (KDA: the decay is already in Kg)
  const int nv = (vt + kW - 1) / kW;
  const Tail vtail = tail_mask(vt - (nv - 1) * kW);
  for (int i = 0; i < n; ++i) {
    float* x = w.X + i * w.ldv;
    const float* ks = w.KS + i * w.ldv;
    const VF b = set1(w.beta[i]), r = set1(p.kda ? 1.0f : w.rs[i]);
    for (int c = 0; c < nv; ++c) {
      const Tail t = c == nv - 1 ? vtail : tail_mask(kW);
      store(x + c * kW, mul(b, fnma(r, load(ks + c * kW, t), load(x + c * kW, t))), t);
    }
  }
  pf.issue_slice();
  trsm_unit_lower(n, vt, w.Ln, w.BT, w.X, w.ldv);  // X = V^
  pf.issue_slice();
  // O = scale e^gamma Q S + P V^
  if (!p.kda)
    for (int i = 0; i < n; ++i) w.rs[i] *= p.scale;
  GemmArgs g;
  g.M = n;
  g.N = vt;
  g.Kd = n;
  g.A = w.P;
  g.a_rs = w.BT;
  g.B = w.X;
  g.ldb = w.ldv;
  g.C = w.QS;
  g.ldc = w.ldv;
  g.accumulate = true;
  g.c_scale = p.scale;
  g.c_row_scale = p.kda ? nullptr : w.rs;
  g.k_tri = true;
  gemm(g);
  for (int i = 0; i < n; ++i)
    store_row(w.QS + i * w.ldv, vt, p.qk_dtype, p.o, ((t0 + i) * p.HV + j) * p.V + v0);
  // S <- e^{gamma_last} S + (e^{gamma_last - gamma} (.) K)^T V^   (in place, after the reads)
  if (!p.kda)
    for (int i = 0; i < n; ++i) {
      float* x = w.X + i * w.ldv;
      const VF r = set1(w.rd[i]);
      for (int c = 0; c < nv; ++c) store(x + c * kW, mul(r, load(x + c * kW)));
    }
  state_update(w, n, K, vt, p.kda ? w.Kd : w.Kc, p.kda ? 1.0f : std::exp(w.gam[n - 1]),
               p.kda ? w.el : nullptr);
}

void run_task(const ChunkParams& p, int64_t vtile, ChunkWork w, int64_t task, int64_t splits) {
  const int64_t split = task % splits, nj = task / splits;
  const int64_t n = nj / p.HV, j = nj % p.HV;
  const int64_t v0 = split * vtile;
  w.vt = std::min(vtile, p.V - v0);
  int64_t bos, eos;
  seq_bounds(p, n, &bos, &eos);
  load_state(p, n, j, v0, w.vt, w.S, w.ldv);
  for (int64_t t0 = bos; t0 < eos; t0 += p.BT)
    chunk_step(p, w, t0, static_cast<int>(std::min<int64_t>(p.BT, eos - t0)), j, v0, eos);
  store_state(p, n, j, v0, w.vt, w.S, w.ldv);
}

// The params with the schedule's compute chunk.
ChunkParams with_chunk(const ChunkParams& p, const ChunkSchedule& s) {
  ChunkParams q = p;
  if (s.bt > 0) q.BT = s.bt;
  return q;
}

int64_t num_tasks(const ChunkParams& p, const ChunkSchedule& s) { return p.N * p.HV * std::max(1, s.v_splits); }

int num_workers(const ChunkParams& p, const ChunkSchedule& s) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(std::max(1, s.num_threads), num_tasks(p, s))));
}

}  // namespace

size_t chunk_fwd_workspace_bytes(const ChunkParams& params, const ChunkSchedule& s) {
  if (s.segments > 1) return chunk_fwd_segmented_workspace_bytes(params, s);  // tier 3
  const ChunkParams p = with_chunk(params, s);
  const int64_t per = layout(p, split_width(p, s), use_bf16_dot(p, s), nullptr, nullptr);
  return static_cast<size_t>(num_tasks(p, s)) * sizeof(int64_t) +
         static_cast<size_t>(per * num_workers(p, s)) * sizeof(float) + 128;
}

void chunk_fwd(const ChunkParams& params, const ChunkSchedule& s, void* ws, size_t ws_bytes) {
  if (s.segments > 1) return chunk_fwd_segmented(params, s, ws, ws_bytes);  // tier 3
  const ChunkParams p = with_chunk(params, s);
  LINATTN_CHECK(ws_bytes >= chunk_fwd_workspace_bytes(p, s), "workspace: expected at least ",
                chunk_fwd_workspace_bytes(p, s), " bytes, got ", ws_bytes);
  const int64_t splits = std::max(1, s.v_splits), vtile = split_width(p, s);
  LINATTN_ASSERT(vtile * splits >= p.V && vtile > 0, "V split ", splits, " x ", vtile, " does not cover V = ", p.V);
  const int64_t ntasks = num_tasks(p, s);
  const int workers = num_workers(p, s);
  uintptr_t cur = (reinterpret_cast<uintptr_t>(ws) + 63) & ~uintptr_t{63};
  int64_t* order = reinterpret_cast<int64_t*>(cur);
  cur = (cur + static_cast<uintptr_t>(ntasks) * sizeof(int64_t) + 63) & ~uintptr_t{63};
  float* base = reinterpret_cast<float*>(cur);
  const bool bf16 = use_bf16_dot(p, s);
  const int64_t per = layout(p, vtile, bf16, nullptr, nullptr);
  // Longest sequences first (lengths read now, at run time), ties in task order.
  for (int64_t i = 0; i < ntasks; ++i) order[i] = i;
  auto len = [&](int64_t task) {
    int64_t b, e;
    seq_bounds(p, task / splits / p.HV, &b, &e);
    return e - b;
  };
  if (p.cu_seqlens != nullptr)
    std::sort(order, order + ntasks, [&](int64_t a, int64_t b) {
      const int64_t la = len(a), lb = len(b);
      return la != lb ? la > lb : a < b;
    });
  std::atomic<int64_t> next{0};
  parallel_for(
      workers,
      [&](int64_t b, int64_t, int) {
        ChunkWork w;
        layout(p, vtile, bf16, base + b * per, &w);
        for (int64_t i = next.fetch_add(1); i < ntasks; i = next.fetch_add(1)) run_task(p, vtile, w, order[i], splits);
      },
      workers);
}

int64_t chunk_work_floats(const ChunkParams& p, int64_t vt_max, bool bf16) {
  return layout(p, vt_max, bf16, nullptr, nullptr);
}

ChunkWork carve_chunk_work(const ChunkParams& p, int64_t vt_max, bool bf16, float* base) {
  ChunkWork w;
  layout(p, vt_max, bf16, base, &w);
  return w;
}

}  // namespace linattn::cpu

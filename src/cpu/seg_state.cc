// The two per-segment passes of seg_pass.h.
// State pass: the chunked forward's state recurrence on an augmented state [S | M] of V + K
// columns, started at [0 | I]; the M columns see zero values, so after the segment they hold the
// transition and the S columns the local final state. Per chunk (ALGORITHMS.md section 3.1):
// X = beta (V - e^gamma K S) (KDA: the decay is in Kg), V^ = (I + L)^-1 X, then
// S <- e^{gamma_last} S + (e^{gamma_last - gamma} K)^T V^. No output is formed.
// Gradient pass, chunks in reverse with dS resident (zero at the segment end):
// Y = P^T dO + (e^{gamma_last - gamma} K) dS, Z = (I + L)^-T Y,
// dS <- e^{gamma_last} dS + scale (e^gamma Q)^T dO - (beta e^gamma K)^T Z.
// Both reuse the forward's row preparation and intra-chunk factors (chunk_work.h). The state
// pass takes the forward's bf16 dot products for bf16 inputs when asked (operands rounded for
// the product only); the gradient pass is fp32.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "core/util.h"
#include "cpu/bwd_blas.h"
#include "cpu/chunk_work.h"
#include "cpu/convert.h"
#include "cpu/gemm.h"
#include "cpu/gemm_bf16.h"
#include "cpu/seg_pass.h"
#include "cpu/simd.h"

namespace linattn::cpu {
namespace {

using namespace simd;

int64_t worker_floats(const ChunkParams& p, bool bf16) {
  // ChunkWork over V + K columns, plus E [2 BT, ldk] for the gradient pass.
  return round_up(chunk_work_floats(p, p.V + p.K, bf16), 16) + 2 * p.BT * round_up(p.K, kW) + 64;
}

void intra(const ChunkParams& p, const ChunkWork& w, int n) {
  if (p.kda) kda_intra(w, n, p.scale);
  else gdn_intra(w, n, p.scale);
}

// S_loc / M of rows [bos, eos), value head j.
void state_task(const ChunkParams& p, ChunkWork w, int64_t bos, int64_t eos, int64_t j, float* S_loc, float* M) {
  const int64_t K = p.K, V = p.V, A = V + K;
  w.vt = A;
  for (int64_t d = 0; d < K; ++d) {
    float* row = w.S + d * w.ldv;
    std::fill(row, row + w.ldv, 0.0f);
    row[V + d] = 1.0f;
  }
  ChunkWork wv = w;  // loads only the V real value columns
  wv.vt = V;
  for (int64_t t0 = bos; t0 < eos; t0 += p.BT) {
    const int n = static_cast<int>(std::min<int64_t>(p.BT, eos - t0));
    prep_rows(p, wv, t0, n, j, 0);
    for (int i = 0; i < n; ++i) std::fill(w.X + i * w.ldv + V, w.X + (i + 1) * w.ldv, 0.0f);
    if (p.kda) kda_intra(w, n, p.scale);
    // as the forward: bf16 mode rounds the operands for the product only
    state_read(w, n, static_cast<int>(K), static_cast<int>(A), p.kda ? w.Kg : w.Kc, false);
    if (!p.kda) gdn_intra(w, n, p.scale);
    for (int i = 0; i < n; ++i) {
      const float b = w.beta[i], r = p.kda ? 1.0f : w.rs[i];
      float* x = w.X + i * w.ldv;
      const float* ks = w.KS + i * w.ldv;
      for (int64_t c = 0; c < A; ++c) x[c] = b * (x[c] - r * ks[c]);
    }
    trsm_unit_lower(n, static_cast<int>(A), w.Ln, w.BT, w.X, w.ldv);
    if (!p.kda)
      for (int i = 0; i < n; ++i)
        for (int64_t c = 0; c < A; ++c) w.X[i * w.ldv + c] *= w.rd[i];
    state_update(w, n, static_cast<int>(K), static_cast<int>(A), p.kda ? w.Kd : w.Kc,
                 p.kda ? 1.0f : std::exp(w.gam[n - 1]), p.kda ? w.el : nullptr);
  }
  for (int64_t d = 0; d < K; ++d) {
    if (S_loc) std::memcpy(S_loc + d * V, w.S + d * w.ldv, sizeof(float) * V);
    if (M) std::memcpy(M + d * K, w.S + d * w.ldv + V, sizeof(float) * K);
  }
}

// dS_loc of rows [bos, eos), value head j.
void dstate_task(const ChunkParams& p, const BwdBuf& d_o, ChunkWork w, float* E, int64_t bos, int64_t eos,
                 int64_t j, const float* dS_end, float* dS_loc) {
  const int64_t K = p.K, V = p.V, BT = p.BT;
  w.vt = V;
  for (int64_t d = 0; d < K; ++d) {
    std::fill(w.S + d * w.ldv, w.S + (d + 1) * w.ldv, 0.0f);
    if (dS_end) std::memcpy(w.S + d * w.ldv, dS_end + d * V, sizeof(float) * V);
  }
  float* D = w.KS;  // dO rows [BT, ldv]
  float* E2 = E + BT * w.ldk;
  const int64_t nchunks = (eos - bos + BT - 1) / BT;
  for (int64_t c = nchunks - 1; c >= 0; --c) {
    const int64_t t0 = bos + c * BT;
    const int n = static_cast<int>(std::min<int64_t>(BT, eos - t0));
    prep_rows(p, w, t0, n, j, 0);
    intra(p, w, n);
    for (int i = 0; i < n; ++i) load_row(d_o.data, d_o.dtype, ((t0 + i) * p.HV + j) * V, V, D + i * w.ldv);
    // Y = (e^{gamma_last - gamma} K) dS + P^T dO, into X.
    bwd::mm(n, static_cast<int>(V), static_cast<int>(K), p.kda ? w.Kd : w.Kc, w.ldk, 1, w.S, w.ldv, w.X, w.ldv,
            false);
    bwd::mm(n, static_cast<int>(V), n, w.P, 1, BT, D, w.ldv, w.X, w.ldv, true, 1.0f, p.kda ? nullptr : w.rd);
    // Z = (I + L)^-T Y: Z_i = Y_i + sum_{r > i} Ln[r, i] Z_r (Ln = -L).
    for (int i = n - 2; i >= 0; --i) {
      float* zi = w.X + i * w.ldv;
      for (int r = i + 1; r < n; ++r) {
        const float l = w.Ln[r * BT + i];
        const float* zr = w.X + r * w.ldv;
        for (int64_t col = 0; col < V; ++col) zi[col] += l * zr[col];
      }
    }
    // E1 = scale e^gamma Q, E2 = -beta e^gamma K (rows).
    for (int i = 0; i < n; ++i) {
      const float* q = p.kda ? w.Qg + i * w.ldk : w.Qc + i * w.ldk;
      const float* k = p.kda ? w.Kg + i * w.ldk : w.Kc + i * w.ldk;
      const float r = p.kda ? 1.0f : w.rs[i];
      for (int64_t d = 0; d < K; ++d) {
        E[i * w.ldk + d] = p.scale * r * q[d];
        E2[i * w.ldk + d] = -w.beta[i] * r * k[d];
      }
    }
    bwd::mm(static_cast<int>(K), static_cast<int>(V), n, E, 1, w.ldk, D, w.ldv, w.S, w.ldv, true,
            p.kda ? 1.0f : std::exp(w.gam[n - 1]), p.kda ? w.el : nullptr);
    bwd::mm(static_cast<int>(K), static_cast<int>(V), n, E2, 1, w.ldk, w.X, w.ldv, w.S, w.ldv, true);
  }
  for (int64_t d = 0; d < K; ++d) std::memcpy(dS_loc + d * V, w.S + d * w.ldv, sizeof(float) * V);
}

// Runs fn(worker scratch, list index, value head) over every (segment, head), longest first.
template <class Fn>
void for_each_task(const ChunkParams& p, const SegList& segs, int threads, bool bf16, void* ws, Fn fn) {
  const int64_t ntasks = segs.num * p.HV;
  if (ntasks == 0) return;
  const int workers = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(std::max(1, threads), ntasks)));
  const int64_t per = worker_floats(p, bf16);
  float* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(ws) + 63) & ~uintptr_t{63});
  std::atomic<int64_t> next{0};
  parallel_for(
      workers,
      [&](int64_t b, int64_t, int) {
        float* mine = base + b * per;
        ChunkWork w = carve_chunk_work(p, p.V + p.K, bf16, mine);
        float* E = mine + round_up(chunk_work_floats(p, p.V + p.K, bf16), 16);
        for (int64_t t = next.fetch_add(1); t < ntasks; t = next.fetch_add(1)) fn(w, E, t / p.HV, t % p.HV);
      },
      workers);
}

int64_t slot_of(const SegList& s, int64_t i) { return s.slot ? s.slot[i] : i; }

}  // namespace

size_t seg_pass_workspace_bytes(const ChunkParams& p, int threads) {
  return static_cast<size_t>(worker_floats(p, kHaveBf16Dot && p.qk_dtype == DType::kBF16)) * sizeof(float) *
             static_cast<size_t>(std::max(1, threads)) + 128;
}

void seg_state_pass(const ChunkParams& p, const SegList& segs, float* S_loc, float* M, int threads, void* ws,
                    bool bf16_dot) {
  const int64_t KV = p.K * p.V, KK = p.K * p.K;
  const bool bf16 = bf16_dot && kHaveBf16Dot && p.qk_dtype == DType::kBF16;
  for_each_task(p, segs, threads, bf16, ws, [&](const ChunkWork& w, float*, int64_t i, int64_t j) {
    const int64_t o = slot_of(segs, i) * p.HV + j;
    state_task(p, w, segs.bos[i], segs.eos[i], j, S_loc ? S_loc + o * KV : nullptr, M ? M + o * KK : nullptr);
  });
}

void seg_dstate_pass(const ChunkParams& p, const BwdBuf& d_o, const SegList& segs, float* dS_loc, int threads,
                     void* ws, const float* dS_end) {
  const int64_t KV = p.K * p.V;
  for_each_task(p, segs, threads, false, ws, [&](const ChunkWork& w, float* E, int64_t i, int64_t j) {
    const int64_t o = slot_of(segs, i) * p.HV + j;
    dstate_task(p, d_o, w, E, segs.bos[i], segs.eos[i], j, dS_end ? dS_end + o * KV : nullptr, dS_loc + o * KV);
  });
}

void affine_state(int64_t K, int64_t V, const float* A, bool transpose_a, const float* X, const float* B,
                  float* Y) {
  if (Y != B) std::memcpy(Y, B, sizeof(float) * K * V);
  bwd::mm(static_cast<int>(K), static_cast<int>(V), static_cast<int>(K), A, transpose_a ? 1 : K, transpose_a ? K : 1,
          X, V, Y, V, true);
}

}  // namespace linattn::cpu

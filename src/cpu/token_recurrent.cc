// Token-by-token GDN / KDA forward (see token_recurrent.h). Per token t of a (sequence n, value
// head j) task: S <- diag(a) S with a = e^g (scalar or per row), u = S^T k, e = beta (v - u),
// S <- S + k e^T, o = scale S^T q.
#include "cpu/token_recurrent.h"

#include <algorithm>
#include <vector>

#include "core/thread_pool.h"
#include "core/util.h"
#include "cpu/chunk_prep.h"
#include "cpu/simd.h"
#include "cpu/state_io.h"

namespace linattn::cpu {
namespace {

using namespace simd;

struct Bufs {
  float *S, *q, *k, *g, *v, *u;
  int64_t ldv;
};

Bufs carve(const ChunkParams& p, float* base) {
  Bufs b;
  b.ldv = round_up(p.V, kW);
  const int64_t ldk = round_up(p.K, kW);
  b.S = base;
  b.q = b.S + p.K * b.ldv;
  b.k = b.q + ldk;
  b.g = b.k + ldk;
  b.v = b.g + ldk;
  b.u = b.v + b.ldv;
  return b;
}

int64_t floats_per_worker(const ChunkParams& p) {
  const int64_t ldv = round_up(p.V, kW), ldk = round_up(p.K, kW);
  return p.K * ldv + 3 * ldk + 3 * ldv + 16;
}

void run_task(const ChunkParams& p, int64_t n, int64_t j, const Bufs& b) {
  int64_t bos, eos;
  seq_bounds(p, n, &bos, &eos);
  load_state(p, n, j, 0, p.V, b.S, b.ldv);
  const int64_t h = j / p.G;
  const int64_t K = p.K, V = p.V;
  const int nv = static_cast<int>((V + kW - 1) / kW);
  const Tail vt = tail_mask(static_cast<int>(V - (nv - 1) * kW));
  for (int64_t t = bos; t < eos; ++t) {
    prep_qk(p, t, h, b.q, b.k);
    const float beta = prep_beta(p, t, j);
    if (p.kda) {
      prep_gate_vec(p, t, j, b.g);
      for (int64_t d = 0; d < K; d += kW) {
        const Tail tm = tail_mask(static_cast<int>(std::min<int64_t>(kW, K - d)));
        store(b.g + d, exp(load(b.g + d, tm)), tm);
      }
    } else {
      const float a = std::exp(prep_gate_scalar(p, t, j));
      std::fill(b.g, b.g + K, a);
    }
    load_row(p.v, p.v_dtype, (t * p.HV + j) * V, V, b.v);
    // Pass 1: decay, u = S^T k.
    for (int c = 0; c < nv; ++c) store(b.u + c * kW, zero());
    for (int64_t d = 0; d < K; ++d) {
      float* row = b.S + d * b.ldv;
      const VF a = set1(b.g[d]), kd = set1(b.k[d]);
      for (int c = 0; c < nv; ++c) {
        const VF s = mul(load(row + c * kW), a);
        store(row + c * kW, s);
        store(b.u + c * kW, fma(kd, s, load(b.u + c * kW)));
      }
    }
    // e = beta (v - u), kept in u.
    for (int c = 0; c < nv; ++c) {
      const VF e = mul(set1(beta), sub(c == nv - 1 ? load(b.v + c * kW, vt) : load(b.v + c * kW), load(b.u + c * kW)));
      store(b.u + c * kW, e);
    }
    // Pass 2: S += k e^T, o = scale S^T q (accumulated in v).
    for (int c = 0; c < nv; ++c) store(b.v + c * kW, zero());
    for (int64_t d = 0; d < K; ++d) {
      float* row = b.S + d * b.ldv;
      const VF kd = set1(b.k[d]), qd = set1(b.q[d]);
      for (int c = 0; c < nv; ++c) {
        const VF s = fma(kd, load(b.u + c * kW), load(row + c * kW));
        store(row + c * kW, s);
        store(b.v + c * kW, fma(qd, s, load(b.v + c * kW)));
      }
    }
    for (int c = 0; c < nv; ++c) store(b.v + c * kW, mul(load(b.v + c * kW), set1(p.scale)));
    store_row(b.v, V, p.qk_dtype, p.o, (t * p.HV + j) * V);
  }
  store_state(p, n, j, 0, p.V, b.S, b.ldv);
}

}  // namespace

size_t token_recurrent_workspace_bytes(const ChunkParams& p, int num_threads) {
  return static_cast<size_t>(floats_per_worker(p) * std::max(1, num_threads)) * sizeof(float) + 64;
}

void token_recurrent_fwd(const ChunkParams& p, int num_threads, void* ws) {
  float* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(ws) + 63) & ~uintptr_t{63});
  const int64_t per = floats_per_worker(p);
  parallel_for(
      p.N * p.HV,
      [&](int64_t b, int64_t e, int w) {
        const Bufs bufs = carve(p, base + w * per);
        for (int64_t task = b; task < e; ++task) run_task(p, task / p.HV, task % p.HV, bufs);
      },
      num_threads);
}

}  // namespace linattn::cpu

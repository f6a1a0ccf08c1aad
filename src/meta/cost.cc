// Chunked GDN / KDA cost model (see cost.h).
#include "meta/cost.h"

#include "linattn/tensor.h"

namespace linattn::meta {

double chunk_fwd_task_kside_flops(int64_t len, int64_t K, int BT) {
  double f = 0.0;
  for (int64_t t0 = 0; t0 < len; t0 += BT) {
    const double n = static_cast<double>(len - t0 < BT ? len - t0 : BT);
    f += 2.0 * n * n * static_cast<double>(K);
  }
  return f;
}

double chunk_fwd_task_flops(int64_t len, int64_t K, int64_t vt, int BT) {
  double f = chunk_fwd_task_kside_flops(len, K, BT);
  for (int64_t t0 = 0; t0 < len; t0 += BT) {
    const double n = static_cast<double>(len - t0 < BT ? len - t0 : BT);
    f += 6.0 * n * static_cast<double>(K) * static_cast<double>(vt) + 2.0 * n * n * static_cast<double>(vt);
  }
  return f;
}

OpCost chunk_fwd_cost(const ChunkAttnDesc& d, const std::vector<int64_t>& lengths) {
  OpCost c;
  const double e = static_cast<double>(dtype_size(d.dtype));
  const double ev = static_cast<double>(dtype_size(d.v_dtype));
  const double eg = static_cast<double>(dtype_size(d.g_dtype)) * static_cast<double>(d.gate_width());
  const double eb = static_cast<double>(dtype_size(d.beta_dtype));
  for (int64_t len : lengths) {
    c.flops += static_cast<double>(d.HV) * chunk_fwd_task_flops(len, d.K, d.V, d.BT);
    const double per_token = static_cast<double>(d.HV) * (2.0 * static_cast<double>(d.K) * e +
                             static_cast<double>(d.V) * (ev + e) + eg + eb);
    c.bytes += static_cast<double>(len) * per_token;
  }
  const double state = static_cast<double>(d.N * d.HV * d.K * d.V) * 4.0;
  c.bytes += (d.has_h0 ? state : 0.0) + (d.has_ht ? state : 0.0);
  return c;
}

OpCost chunk_bwd_cost(const ChunkAttnDesc& d, const std::vector<int64_t>& lengths) {
  OpCost c = chunk_fwd_cost(d, lengths);  // recompute + the same tensors read again
  double extra = 0.0;
  const double K = static_cast<double>(d.K), V = static_cast<double>(d.V);
  for (int64_t len : lengths)
    for (int64_t t0 = 0; t0 < len; t0 += d.BT) {
      const double n = static_cast<double>(len - t0 < d.BT ? len - t0 : d.BT);
      extra += 12.0 * n * K * V + 6.0 * n * n * (K + V);
    }
  c.flops += static_cast<double>(d.HV) * extra;
  c.bytes *= 2.0;  // gradients written like the inputs, d_o read like o
  return c;
}

double token_recurrent_flops(const ChunkAttnDesc& d, const std::vector<int64_t>& lengths) {
  double tokens = 0.0;
  for (int64_t len : lengths) tokens += static_cast<double>(len);
  return tokens * static_cast<double>(d.HV) * 8.0 * static_cast<double>(d.K) * static_cast<double>(d.V);
}

}  // namespace linattn::meta

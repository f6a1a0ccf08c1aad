// Internals of the fp64 GDN / KDA reference shared by its forward and backward files.
// Tensors are addressed by their logical row-major ("flat") index, whatever their strides, and
// converted to/from double. One (sequence, value head) pair is loaded into a HeadInputs with every
// in-kernel transform (L2 norm, gate, beta sigmoid) applied and its local derivative kept, so the
// recurrence and its reverse pass read plain fp64 arrays. States are K-major [K, V] doubles here;
// load_state / store_state convert from / to the caller's layout.
#pragma once
#include <cstdint>
#include <vector>

#include "linattn/ops.h"
#include "meta/chunk_attn_desc.h"

namespace linattn::ref::detail {

// Element offset of the logical row-major index `flat` of t (any strides).
int64_t flat_offset(const TensorView& t, int64_t flat);
double read(const TensorView& t, int64_t flat);               // any float dtype
void write(const TensorView& t, int64_t flat, double value);  // rounded to t's dtype

// Token rows [t0, t0 + len) of batch row b hold sequence n.
struct SeqRange {
  int64_t b = 0, t0 = 0, len = 0;
};
std::vector<SeqRange> sequences(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in);

struct HeadInputs {
  int64_t L = 0, K = 0, V = 0;
  int64_t gw = 1;                      // gate values per token: 1 (GDN) or K (KDA)
  std::vector<double> q, k;            // [L, K] after the optional in-kernel L2 norm
  std::vector<double> q_rstd, k_rstd;  // [L] 1 / sqrt(sum x^2 + 1e-6) (unused without the norm)
  std::vector<double> v;               // [L, V]
  std::vector<double> g;               // [L, gw] log-decay after the optional in-kernel gate
  std::vector<double> dg_draw;         // [L, gw] d g / d (stored g)
  std::vector<double> dg_dA;           // [L, gw] d g / d A_log (0 when A_log is not used)
  std::vector<double> beta;            // [L] after the optional sigmoid
  std::vector<double> dbeta_draw;      // [L] d beta / d (stored beta)

  double log_decay(int64_t t, int64_t kk) const { return g[t * gw + (gw == 1 ? 0 : kk)]; }
};

// Loads sequence `s` (index n) for value head j (q/k head j / G).
HeadInputs load_head(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in, const SeqRange& s,
                     int64_t j);

// Flat index of state entry (n, j, kk, vv) in the caller's layout ([N,HV,K,V] or [N,HV,V,K]).
int64_t state_index(const meta::ChunkAttnDesc& d, int64_t n, int64_t j, int64_t kk, int64_t vv);
void load_state(const meta::ChunkAttnDesc& d, const TensorView& t, int64_t n, int64_t j,
                double* S);  // S: [K, V]
void store_state(const meta::ChunkAttnDesc& d, const TensorView& t, int64_t n, int64_t j,
                 const double* S);  // S: [K, V]

// Token t of the recurrence on S [K, V]: S <- Diag(e^g) S; e = v - S^T k; S += beta k e^T.
void step(const HeadInputs& h, int64_t t, double* S);
// o [V] = scale * S^T q_t (S after token t's write).
void read_out(const HeadInputs& h, int64_t t, double scale, const double* S, double* o);

// Validates the inputs (descriptor + cu_seqlens data) and returns the descriptor. Where the public
// API demands fp32 (A_log, dt_bias, KDA initial_state, final_state) the reference also takes fp64:
// such tensors are shown to meta's checks as fp32 (fp64_as_fp32), everything else is checked as is.
TensorView fp64_as_fp32(TensorView t);
meta::ChunkAttnDesc describe_and_validate(const ChunkAttnInputs& in, const ChunkAttnOptions& opt);

}  // namespace linattn::ref::detail

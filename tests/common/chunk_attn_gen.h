// Seeded random inputs for GDN / KDA tests (ALGORITHMS.md section 8 distributions) and owning
// host tensors for ChunkAttnInputs / Outputs / Grads. Values are generated in double and rounded
// once into each tensor's dtype, so the stored tensor *is* the input (feed the same tensors to the
// fp64 reference and to a backend). Generators never produce all-zero tensors; the only exact zeros
// are deliberate (no-decay gate heads). Outputs and gradients are allocated filled with NaN so an
// element a backend forgot to write fails every comparison.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "linattn/ops.h"
#include "linattn/tensor.h"

namespace linattn::test {

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double normal() { return normal_(gen_); }    // N(0, 1)
  double uniform() { return uniform_(gen_); }  // U[0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  int64_t integer(int64_t lo, int64_t hi);  // uniform in [lo, hi]
  bool bernoulli(double p) { return uniform() < p; }
  std::mt19937_64& engine() { return gen_; }

 private:
  std::mt19937_64 gen_;
  std::normal_distribution<double> normal_{0.0, 1.0};
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
};

double log_sigmoid(double x);

Tensor randn(Rng& rng, DType dtype, std::vector<int64_t> shape, double stddev = 1.0);
Tensor uniform(Rng& rng, DType dtype, std::vector<int64_t> shape, double lo, double hi);
Tensor full(DType dtype, std::vector<int64_t> shape, double value);
Tensor nan_tensor(DType dtype, std::vector<int64_t> shape);  // "not written yet"

// cu_seqlens [N + 1] (prefix sums of `seqlens`) in int32 or int64.
Tensor cu_seqlens_tensor(const std::vector<int64_t>& seqlens, DType dtype);
// N lengths summing to `total`; each sequence is empty with probability p_zero (total > 0 keeps
// at least one non-empty sequence).
std::vector<int64_t> random_seqlens(Rng& rng, int64_t N, int64_t total, double p_zero);
// Lengths around a chunk size: 0, 1, BT-1, BT, BT+1, 2BT+3 (the edge cases every backend runs).
std::vector<int64_t> edge_seqlens(int64_t BT);

enum class QkDist : uint8_t {
  kAuto,      // unit-norm rows, or kRandn when the L2 norm is in kernel
  kUnitNorm,  // randn rows normalised to ||x|| = 1
  kRandn,     // raw N(0, 1) (the norm then matters)
  kUniform,   // U[0, 1) as FLA's test_chunk
};

enum class GateDist : uint8_t {  // log-decay g when the gate is NOT in kernel
  kLogSigmoid,                   // logsigmoid(randn): typical decays, mostly in (-3, 0)
  kStrong,      // logsigmoid(U[0,1)) / 0.01: -31..-69 per step (FLA's norm = 0.01 case)
  kNoDecay,     // exactly 0 (FLA's mask_p = 1)
  kMixedHeads,  // value head j: j % 3 == 0 log-sigmoid, 1 strong decay, 2 no decay
};

struct ChunkAttnSpec {
  ChunkAttnOptions opt;  // op and every in-kernel option (read by the generator)
  int64_t B = 1, T = 16, H = 1, HV = 1, K = 16, V = 16;
  std::vector<int64_t> seqlens;     // non-empty: varlen, B = 1, T = sum(seqlens) + pad_tokens
  int64_t pad_tokens = 0;           // varlen rows after cu_seqlens[N] (left alone by the op)
  DType dtype = DType::kF32;        // q, k, v
  DType gate_dtype = DType::kF32;   // g, beta
  DType state_dtype = DType::kF32;  // initial_state
  DType param_dtype = DType::kF32;  // A_log, dt_bias
  DType cu_dtype = DType::kI32;
  QkDist q_dist = QkDist::kAuto, k_dist = QkDist::kAuto;
  GateDist gate = GateDist::kLogSigmoid;
  double extreme_gate_frac = 0.0;  // fraction of log-decay entries forced to -1000
  bool has_h0 = true;
  bool has_A_log = true;    // with the gate in kernel (KDA lower_bound form may drop it)
  bool has_dt_bias = true;  // with the gate in kernel
  bool dt_bias_2d = false;  // KDA: dt_bias as [HV, K] instead of [HV * K]
  uint64_t seed = 1;

  ChunkAttnSpec& all_dtypes(DType t) {  // every float tensor in one dtype (e.g. fp64 ref tests)
    dtype = gate_dtype = state_dtype = param_dtype = t;
    return *this;
  }
};

struct ChunkAttnData {
  ChunkAttnSpec spec;
  int64_t N = 0;             // sequences
  int64_t valid_tokens = 0;  // rows the op reads per batch row: cu_seqlens[N], or T
  Tensor q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens;  // absent = not defined

  ChunkAttnInputs inputs() const;
  const ChunkAttnOptions& opt() const { return spec.opt; }
  bool kda() const { return spec.opt.op == ChunkOp::kKda; }
  int64_t T() const { return spec.T; }
};

ChunkAttnData make_chunk_attn(const ChunkAttnSpec& spec);
// The same values with q, k, v rounded to `dtype` (the rest unchanged).
ChunkAttnData with_qkv_dtype(const ChunkAttnData& d, DType dtype);

struct ChunkAttnOutTensors {
  Tensor o, final_state;
  ChunkAttnOutputs views() const { return {o.view(), final_state.view()}; }
};
// o [B, T, HV, V] in o_dtype; final_state (when opt.output_final_state) in state_dtype; NaN-filled.
ChunkAttnOutTensors alloc_outputs(const ChunkAttnData& d, DType o_dtype, DType state_dtype);

struct ChunkAttnGradTensors {
  Tensor dq, dk, dv, dg, dbeta, dA_log, ddt_bias, dinitial_state;
  ChunkAttnGrads views() const;
};
// One gradient per present input, shaped like it: dq/dk/dv/dg/dbeta in grad_dtype, dA_log /
// ddt_bias / dinitial_state in param_dtype (fp32 in the public API). NaN-filled.
ChunkAttnGradTensors alloc_grads(const ChunkAttnData& d, DType grad_dtype, DType param_dtype);

struct ChunkAttnCotangents {
  Tensor d_o, d_final_state;  // d_final_state absent unless requested
};
ChunkAttnCotangents random_cotangents(const ChunkAttnData& d, Rng& rng, DType dtype,
                                      bool with_final_state);

std::vector<int64_t> state_shape(const ChunkAttnData& d);  // [N, HV, K, V] or [N, HV, V, K]

}  // namespace linattn::test

// GatedDeltaNet and KDA layers (FLA's fla/layers/{gated_deltanet,kda}.py, ALGORITHMS.md section 7):
// projections -> short convs (SiLU) -> chunked GDN / KDA (l2norm, gate and beta sigmoid in kernel)
// -> gated RMSNorm -> output projection; forward for prefill and training, backward producing
// the input gradient and every weight gradient. Written only against the public API.
// Activations live in static buffers sized by reserve(T_max, N_max), so forward (and backward)
// can be captured once into a graph and replayed with new inputs and new cu_seqlens.
// CPU backend: fp32 weights and activations (OpenBLAS GEMMs). CUDA backend: fp32, bf16 or fp16
// (LayerConfig::dtype) projection weights and activations with fp32 accumulation (cuBLAS), fp32
// A_log / dt_bias / norm weight / conv weights, fp32 weight gradients, dx accumulated in fp32;
// GDN and KDA both run on CUDA.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "linattn/dense.h"
#include "linattn/ops.h"

namespace linattn {

enum class LayerKind : uint8_t { kGatedDeltaNet, kKda };

struct LayerConfig {
  LayerKind kind = LayerKind::kGatedDeltaNet;
  int64_t hidden_size = 2048;
  int64_t num_heads = 16;      // H (q/k heads)
  int64_t num_v_heads = 32;    // HV (GDN; KDA uses HV = H)
  int64_t head_k_dim = 128;    // K
  int64_t head_v_dim = 128;    // V
  int conv_size = 4;
  bool allow_neg_eigval = false;
  bool safe_gate = false;      // KDA
  bool has_lower_bound = false;
  double lower_bound = 0.0;    // KDA
  float norm_eps = 1e-5f;
  int chunk_size = 64;
  DType dtype = DType::kF32;   // weights and activations

  int64_t key_dim() const { return num_heads * head_k_dim; }
  int64_t value_dim() const { return num_v_heads * head_v_dim; }
  int64_t gate_dim() const { return kind == LayerKind::kKda ? num_v_heads * head_k_dim : num_v_heads; }
  std::string describe() const;
};

// A named parameter with its gradient (same shape). Projection weights (and KDA's g_proj.1.bias)
// are stored in the layer dtype, everything else in fp32; gradients are always fp32.
struct Param {
  std::string name;            // FLA state-dict name, e.g. "q_proj.weight"
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;   // of value
  Buffer value, grad;
  TensorView view() const;
  TensorView grad_view() const;
};

struct LayerRunOptions {
  bool use_graph = false;      // fixed-capacity path (static buffers, device-side metadata)
  bool training = false;       // keep what backward needs
};

class LinearAttentionLayer {
 public:
  LinearAttentionLayer(const LayerConfig& config, Device device);
  ~LinearAttentionLayer();
  LinearAttentionLayer(LinearAttentionLayer&&) noexcept;
  LinearAttentionLayer& operator=(LinearAttentionLayer&&) noexcept;

  const LayerConfig& config() const;
  std::vector<Param>& params();
  Param& param(const std::string& name);

  // FLA-like initialisation (A_log, dt_bias as FLA; projections ~ U(-1/sqrt(fan_in), ..)).
  void init_random(uint64_t seed);
  // Loads every parameter named `prefix + name` from a safetensors file (fp32/bf16/fp16;
  // conv weights [D, 1, W] are squeezed); missing or misshapen tensors raise Error.
  void load_safetensors(const std::string& path, const std::string& prefix = "");
  void save_safetensors(const std::string& path, const std::string& prefix = "") const;

  // Allocates the static activation buffers for up to T_max tokens in up to N_max sequences,
  // and on CUDA the dense ops' state for ctx.stream (cuBLAS handle and workspace): reserve on the
  // stream you capture on before capturing. Growing (explicitly, or by an eager call over
  // capacity) never frees the old buffers: a captured graph may still use them; they live as
  // long as the layer.
  void reserve(int64_t T_max, int64_t N_max, const ExecContext& ctx = {});
  int64_t capacity_tokens() const;

  // x, y: [1, T, hidden] in the layer dtype (T <= reserved T_max); cu_seqlens [N + 1] (N + 1 <= N_max + 1 in graph
  // mode, where it must have exactly N_max + 1 entries). initial_state [N, HV, K, V] fp32,
  // optional; final_state likewise, optional.
  void forward(const TensorView& x, const TensorView& cu_seqlens, const TensorView& y,
               const LayerRunOptions& opt, const ExecContext& ctx = {},
               const TensorView& initial_state = {}, const TensorView& final_state = {});
  // After a training forward with the same tensors: dx [1, T, hidden] (layer dtype); weight gradients are
  // written (not accumulated) into params()[i].grad.
  void backward(const TensorView& dy, const TensorView& dx, const ExecContext& ctx = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace linattn

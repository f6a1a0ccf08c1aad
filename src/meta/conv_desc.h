// ConvDesc: the validated description of one short causal conv call (ALGORITHMS.md section 6),
// and ConvParams, the POD that the CPU and CUDA kernels receive (they never see TensorViews).
// Layouts: x / y / residual / dy / dx / dresidual are [B, T, D] with the channel dim contiguous
// and any (non-negative) batch and token strides; weight [D, W], bias [D] and the states
// [N, D, W] are contiguous. State slot W-1 holds the newest token; slot 0 is never read by the
// convolution. Varlen packs N sequences into [1, T, D] with cu_seqlens [N + 1]; dense [B, T, D]
// is N = B sequences of T tokens. In graph mode rows >= cu_seqlens[N] are padding.
// Graph mode needs no chunk tables: kernels tile rows by capacity and find each tile's sequence
// by a binary search of cu_seqlens when they run (offsets clamped to [0, T]), so
// ConvOptions::chunk_size is validated ({16, 32, 64}) but does not change the computation.
// Padding rows (>= cu_seqlens[N]) of y / dx / dresidual are left untouched.
// Workspace: conv_bwd needs fixed-order partial sums of dweight / dbias; the sizes below are
// the single place they are counted (count-then-carve).
#pragma once
#include <cstddef>
#include <cstdint>

#include "linattn/ops.h"

namespace linattn::meta {

inline constexpr int kConvMaxW = 8;

struct ConvDesc {
  int64_t B = 0, T = 0, D = 0, W = 0;
  int64_t N = 0;                  // sequences: cu_seqlens.size - 1 when varlen, else B
  bool varlen = false;
  DType dtype = DType::kF32;      // x, y, residual, final_state, dy, dx, dresidual
  DType w_dtype = DType::kF32, b_dtype = DType::kF32, h0_dtype = DType::kF32;
  DType cu_dtype = DType::kI32;
  Device device{};
  Activation act = Activation::kSilu;
  bool has_bias = false, has_residual = false, has_h0 = false, has_ht = false;
  bool use_graph = false;

  int64_t rows() const { return B * T; }  // flat token rows, padding included
};

// Validates inputs and options (shapes, dtypes, devices, W, graph options); throws
// linattn::Error naming the argument, the expected and the actual value. cu_seqlens data is
// not read here (see validate_cu_seqlens_host).
ConvDesc describe_conv(const ConvInputs& in, const ConvOptions& opt);
// y like x (dtype of x); final_state [N, D, W] dtype of x, required iff output_final_state.
void check_conv_fwd_outputs(const ConvDesc& d, const ConvOutputs& out);
// dy like y; d_final_state [N, D, W] any float dtype, optional, only with output_final_state;
// dx / dresidual like x / residual; dweight, dbias, dinitial_state shaped like their inputs,
// any float dtype; each only when its input exists.
void check_conv_bwd_args(const ConvDesc& d, const TensorView& dy, const TensorView& d_final_state,
                         const ConvGrads& g);

// A [B, T, D] tensor as the kernels see it: element (b, t, c) is at b*sb + t*st + c.
struct ConvRows {
  void* data = nullptr;
  int64_t sb = 0, st = 0;
};

struct ConvParams {
  int64_t B = 0, T = 0, D = 0, W = 0, N = 0;
  bool varlen = false;
  bool silu = false;
  DType dtype = DType::kF32;               // of every ConvRows tensor
  const void* cu = nullptr;                // [N + 1] int32 / int64 (varlen) or null (dense)
  DType cu_dtype = DType::kI32;
  ConvRows x;                              // [B, T, D]
  const void* weight = nullptr;            // [D, W]
  DType w_dtype = DType::kF32;
  const void* bias = nullptr;              // [D] or null
  DType b_dtype = DType::kF32;
  ConvRows residual;                       // [B, T, D] or data null
  const void* h0 = nullptr;                // [N, D, W] or null
  DType h0_dtype = DType::kF32;
  // Forward outputs.
  ConvRows y;                              // [B, T, D]
  void* ht = nullptr;                      // [N, D, W] (dtype) or null
  // Backward inputs and outputs (null = absent / not requested).
  ConvRows dy;                             // [B, T, D]
  const void* dht = nullptr;               // [N, D, W]
  DType dht_dtype = DType::kF32;
  ConvRows dx;                             // [B, T, D]
  ConvRows dres;                           // [B, T, D]
  void* dweight = nullptr;                 // [D, W]
  DType dw_dtype = DType::kF32;
  void* dbias = nullptr;                   // [D]
  DType db_dtype = DType::kF32;
  void* dh0 = nullptr;                     // [N, D, W]
  DType dh0_dtype = DType::kF32;
  float* partials = nullptr;               // backward workspace, conv_*_partials_floats

  int64_t rows() const { return B * T; }
};

// CPU backward: dweight / dbias partial sums over a fixed number of row groups (independent of
// the thread count, so 1 and N threads give bitwise equal results).
inline constexpr int64_t kConvCpuRowTile = 32;
inline constexpr int64_t kConvCpuMaxGroups = 32;
int64_t conv_cpu_num_groups(int64_t rows);
// CUDA: a block (256 threads) owns one channel tile (256 bytes of every row) and a group of
// consecutive 64-row tiles. The number of row groups depends only on (rows, D), so that short
// inputs still get ~4096 blocks (~10 waves of 3 blocks per SM on an H200: the last, partial wave
// costs little; 1024 blocks were 2.6 waves); the backward writes one dweight / dbias partial per group.
inline constexpr int64_t kConvCudaRowTile = 64;
int64_t conv_cuda_num_row_groups(int64_t rows, int64_t D);
int64_t conv_cuda_tiles_per_group(int64_t rows, int64_t D);

// Floats of partials the backward needs on `device` ([groups or row blocks, W + 1, D]), and the
// workspace bytes (rounded up to 256).
int64_t conv_bwd_partials_floats(const ConvDesc& d);
size_t conv_bwd_workspace_bytes(const ConvDesc& d);

}  // namespace linattn::meta

// Validation of short-conv calls (ConvDesc) and the backward's workspace count. Every message
// names the argument, the expected and the actual value.
#include "meta/conv_desc.h"

#include "core/check.h"
#include "core/util.h"
#include "meta/chunk_attn_desc.h"

namespace linattn::meta {

namespace {

// fp64 is accepted here for the reference (finite-difference tests); the kernels reject it.
bool is_x_dtype(DType t) {
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16 || t == DType::kF64;
}

// [B, T, D] with the channel dim contiguous; batch / token strides free but non-negative.
void expect_rows(const TensorView& t, const char* name, const ConvDesc& d) {
  expect_rank(t, name, 3);
  expect_dim(t, name, 0, d.B);
  expect_dim(t, name, 1, d.T);
  expect_dim(t, name, 2, d.D);
  expect_dtype(t, name, d.dtype);
  expect_device(t, name, d.device);
  LINATTN_CHECK(t.strides[2] == 1 || d.D <= 1, name, ": expected the channel dim (2) contiguous (stride 1), got stride ",
                t.strides[2]);
  LINATTN_CHECK(t.strides[0] >= 0 && t.strides[1] >= 0, name,
                ": expected non-negative strides, got [", t.strides[0], ", ", t.strides[1], ", ",
                t.strides[2], "]");
  LINATTN_CHECK(t.numel() == 0 || t.data != nullptr, name, ": null data pointer for shape ",
                t.shape_str());
}

void expect_small(const TensorView& t, const char* name, const ConvDesc& d,
                  std::initializer_list<int64_t> shape) {
  expect_rank(t, name, static_cast<int>(shape.size()));
  int i = 0;
  for (int64_t s : shape) expect_dim(t, name, i++, s);
  expect_dtype_float(t, name);
  expect_device(t, name, d.device);
  expect_contiguous(t, name);
}

}  // namespace

ConvDesc describe_conv(const ConvInputs& in, const ConvOptions& opt) {
  ConvDesc d;
  expect_rank(in.x, "x", 3);
  LINATTN_CHECK(is_x_dtype(in.x.dtype), "x: expected dtype fp32, bf16, fp16 (or fp64, reference only), got ",
                dtype_name(in.x.dtype));
  d.B = in.x.shape[0];
  d.T = in.x.shape[1];
  d.D = in.x.shape[2];
  d.dtype = in.x.dtype;
  d.device = in.x.device;
  LINATTN_CHECK(d.D > 0, "x: expected at least one channel (dim 2), got ", d.D);
  expect_rows(in.x, "x", d);

  expect_rank(in.weight, "weight", 2);
  expect_dim(in.weight, "weight", 0, d.D);
  d.W = in.weight.shape[1];
  LINATTN_CHECK(d.W >= 1 && d.W <= kConvMaxW, "weight: expected width W (dim 1) in [1, ", kConvMaxW,
                "], got ", d.W);
  expect_small(in.weight, "weight", d, {d.D, d.W});
  d.w_dtype = in.weight.dtype;

  d.has_bias = in.bias.defined();
  if (d.has_bias) {
    expect_small(in.bias, "bias", d, {d.D});
    d.b_dtype = in.bias.dtype;
  }
  d.has_residual = in.residual.defined();
  if (d.has_residual) expect_rows(in.residual, "residual", d);

  d.varlen = in.cu_seqlens.defined();
  if (d.varlen) {
    const TensorView& cu = in.cu_seqlens;
    expect_rank(cu, "cu_seqlens", 1);
    LINATTN_CHECK(cu.dtype == DType::kI32 || cu.dtype == DType::kI64,
                  "cu_seqlens: expected dtype int32 or int64, got ", dtype_name(cu.dtype));
    expect_device(cu, "cu_seqlens", d.device);
    expect_contiguous(cu, "cu_seqlens");
    LINATTN_CHECK(cu.shape[0] >= 2, "cu_seqlens: expected at least 2 entries (N + 1), got ", cu.shape[0]);
    LINATTN_CHECK(d.B == 1, "x: expected batch size 1 with cu_seqlens (varlen), got B = ", d.B);
    d.cu_dtype = cu.dtype;
    d.N = cu.shape[0] - 1;
  } else {
    d.N = d.B;
  }

  d.has_h0 = in.initial_state.defined();
  if (d.has_h0) {
    expect_small(in.initial_state, "initial_state", d, {d.N, d.D, d.W});
    d.h0_dtype = in.initial_state.dtype;
  }
  d.has_ht = opt.output_final_state;
  LINATTN_CHECK(opt.activation == Activation::kNone || opt.activation == Activation::kSilu,
                "activation: expected none or silu, got ", static_cast<int>(opt.activation));
  d.act = opt.activation;
  LINATTN_CHECK(opt.chunk_size == 16 || opt.chunk_size == 32 || opt.chunk_size == 64,
                "chunk_size: expected one of {16, 32, 64}, got ", opt.chunk_size);

  d.use_graph = opt.use_graph;
  if (opt.use_graph) {
    LINATTN_CHECK(d.varlen, "cu_seqlens: required with use_graph = true (fixed-capacity path), got none");
    LINATTN_CHECK(opt.max_num_seqs == d.N, "max_num_seqs: expected cu_seqlens.size - 1 = ", d.N,
                  ", got ", opt.max_num_seqs);
  }
  return d;
}

void check_conv_fwd_outputs(const ConvDesc& d, const ConvOutputs& out) {
  expect_rows(out.y, "y", d);
  if (d.has_ht) {
    expect_small(out.final_state, "final_state", d, {d.N, d.D, d.W});
    expect_dtype(out.final_state, "final_state", d.dtype);
  } else {
    LINATTN_CHECK(!out.final_state.defined(),
                  "final_state: given but output_final_state = false (expected none)");
  }
}

void check_conv_bwd_args(const ConvDesc& d, const TensorView& dy, const TensorView& d_final_state,
                         const ConvGrads& g) {
  expect_rows(dy, "dy", d);
  if (d_final_state.defined()) {
    LINATTN_CHECK(d.has_ht, "d_final_state: given but output_final_state = false (expected none)");
    expect_small(d_final_state, "d_final_state", d, {d.N, d.D, d.W});
  }
  if (g.dx.defined()) expect_rows(g.dx, "dx", d);
  if (g.dweight.defined()) expect_small(g.dweight, "dweight", d, {d.D, d.W});
  if (g.dbias.defined()) {
    LINATTN_CHECK(d.has_bias, "dbias: given but there is no bias input");
    expect_small(g.dbias, "dbias", d, {d.D});
  }
  if (g.dresidual.defined()) {
    LINATTN_CHECK(d.has_residual, "dresidual: given but there is no residual input");
    expect_rows(g.dresidual, "dresidual", d);
  }
  if (g.dinitial_state.defined()) {
    LINATTN_CHECK(d.has_h0, "dinitial_state: given but there is no initial_state input");
    expect_small(g.dinitial_state, "dinitial_state", d, {d.N, d.D, d.W});
  }
}

int64_t conv_cpu_num_groups(int64_t rows) {
  const int64_t tiles = ceil_div(rows, kConvCpuRowTile);
  return tiles < kConvCpuMaxGroups ? tiles : kConvCpuMaxGroups;
}

int64_t conv_cuda_num_row_groups(int64_t rows, int64_t D) {
  const int64_t tiles = ceil_div(rows, kConvCudaRowTile);
  const int64_t want = ceil_div(4096, ceil_div(D, 128));
  const int64_t g = want < tiles ? want : tiles;
  return g > 1 ? ceil_div(tiles, ceil_div(tiles, g)) : 1;  // no empty groups
}

int64_t conv_cuda_tiles_per_group(int64_t rows, int64_t D) {
  return ceil_div(ceil_div(rows, kConvCudaRowTile), conv_cuda_num_row_groups(rows, D));
}

int64_t conv_bwd_partials_floats(const ConvDesc& d) {
  const int64_t parts = d.device.type == DeviceType::kCPU ? conv_cpu_num_groups(d.rows())
                                                          : conv_cuda_num_row_groups(d.rows(), d.D);
  return parts * (d.W + 1) * d.D;
}

size_t conv_bwd_workspace_bytes(const ConvDesc& d) {
  return static_cast<size_t>(round_up(conv_bwd_partials_floats(d) * 4, 256));
}

}  // namespace linattn::meta

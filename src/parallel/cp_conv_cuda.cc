// Context-parallel short causal conv on CUDA tensors (see cp_ops.h, cp_cuda.h). Per rank, on
// ctx.stream, no host reads of device data:
//   forward: virtual cu_seqlens [N + 1] (sequence n keeps its index, rows clamped to this rank) ->
//   record the last W rows of x -> all-gather [world, W, D] -> the head's virtual initial state
//   (rows of earlier ranks, or the sequence's own initial-state slots) -> the CUDA conv_fwd on
//   the rank's rows -> final states of the sequences ending here.
//   backward: the forward exchange again -> conv_bwd with the terminal gradients of the sequences
//   ending here -> all-gather every head's initial-state gradient [world, D, W] -> adds onto dx
//   rows / dinitial_state slots of this rank (in rank order) -> dweight / dbias partials
//   all-gathered and summed in rank order (fp64).
// Scratch (fp32 unless noted): vcu int64 [N + 1]; records; h0 [N, D, W]; final states [N, D, W]
// (x dtype); backward: dht, dh0 [N, D, W], param partials [D W + D] and the inner conv_bwd workspace.
#include "core/check.h"
#include "parallel/cp_cuda.h"

#if LINATTN_WITH_CUDA
namespace linattn::parallel {
namespace {

struct ConvPlan {
  dev::Layout L;
  int64_t D = 0, W = 0, N = 1;
  int world = 1;
  // device pieces
  int64_t* vcu = nullptr;
  float *rec = nullptr, *all = nullptr, *h0 = nullptr;
  void* ht = nullptr;
  float *dht = nullptr, *dh0 = nullptr, *rec2 = nullptr, *all2 = nullptr, *prm = nullptr, *allp = nullptr;
  void* inner = nullptr;
  size_t inner_bytes = 0, total = 0;
  ConvInputs vin;
  ConvOptions vopt;
};

// Carves the pieces from `base` (kCountingBase: counting) and sizes the inner conv_bwd workspace.
ConvPlan plan(const CpContext& cp, const ConvInputs& in, const ConvOptions& opt, uintptr_t base, bool backward) {
  LINATTN_CHECK(in.x.defined() && in.weight.defined(), "x, weight: expected tensors, got none");
  ConvPlan p;
  p.L = cudacp::open_call(cp, "conv", in.cu_seqlens, in.x, "x", 3);
  p.D = in.x.shape[2];
  p.W = in.weight.shape[1];
  p.N = p.L.N;
  p.world = p.L.world;
  const int64_t DW = p.D * p.W, NDW = p.N * DW;
  cudacp::Carve c{base};
  p.vcu = c.take<int64_t>(static_cast<size_t>(p.N + 1));
  p.rec = c.take<float>(DW);
  p.all = c.take<float>(p.world * DW);
  p.h0 = c.take<float>(NDW);
  p.ht = c.take<char>(NDW * dtype_size(in.x.dtype));
  if (backward) {
    p.dht = c.take<float>(NDW);
    p.dh0 = c.take<float>(NDW);
    p.rec2 = c.take<float>(DW);
    p.all2 = c.take<float>(p.world * DW);
    p.prm = c.take<float>(DW + p.D);
    p.allp = c.take<float>(p.world * (DW + p.D));
  }
  p.vin = in;
  p.vin.cu_seqlens = TensorView::contiguous(p.vcu, DType::kI64, {p.N + 1}, in.x.device);
  p.vin.initial_state = TensorView::contiguous(p.h0, DType::kF32, {p.N, p.D, p.W}, in.x.device);
  p.vopt = opt;
  p.vopt.max_num_seqs = p.N;
  if (backward && p.L.rows > 0) p.inner_bytes = conv_bwd_workspace_bytes(p.vin, p.vopt);
  p.inner = c.take<char>(p.inner_bytes);
  p.total = c.used();
  return p;
}

TensorView states(void* data, DType dt, const ConvPlan& p, Device dev) {
  return TensorView::contiguous(data, dt, {p.N, p.D, p.W}, dev);
}

void forward_exchange(const CpContext& cp, const ConvInputs& in, const ConvPlan& p, void* s) {
  dev::virtual_cu(p.L, p.vcu, nullptr, s);
  dev::conv_tail_rows(in.x.data, in.x.dtype, in.x.strides[1], p.L.rows, p.D, p.W, p.rec, s);
  cp.comm->all_gather(p.rec, p.all, sizeof(float) * p.D * p.W, s);
  const TensorView& h0 = in.initial_state;
  dev::conv_head_state(p.L, p.all, h0.defined() ? h0.data : nullptr, h0.dtype, p.D, p.W, p.h0, s);
}

}  // namespace

size_t cp_conv_workspace_bytes_cuda(const CpContext& cp, const ConvInputs& in, const ConvOptions& opt) {
  return plan(cp, in, opt, cudacp::kCountingBase, true).total;
}

void cp_conv_fwd_cuda(const CpContext& cp, const ConvInputs& in, const ConvOutputs& out, const ConvOptions& opt,
                      const ExecContext& ctx) {
  cudacp::DeviceScope scope(in.x.device.index);
  const size_t need = plan(cp, in, opt, cudacp::kCountingBase, false).total;
  cudacp::Scratch ws(ctx, need, opt.use_graph, "conv");
  const ConvPlan p = plan(cp, in, opt, ws.base(), false);
  void* s = ctx.stream;
  forward_exchange(cp, in, p, s);
  const Device dev = in.x.device;
  if (p.L.rows > 0) {
    ExecContext c = ctx;
    c.workspace = nullptr;
    c.workspace_bytes = 0;
    conv_fwd(p.vin, ConvOutputs{out.y, opt.output_final_state ? states(p.ht, in.x.dtype, p, dev) : TensorView{}},
             p.vopt, c);
  }
  if (!opt.output_final_state) return;
  // Sequences ending here (an empty rank owns only empty sequences: their final state is h0).
  const bool ran = p.L.rows > 0;
  dev::copy_states(p.L, dev::Pick::kEndsHere, false, ran ? p.ht : p.h0, ran ? in.x.dtype : DType::kF32,
                   out.final_state.data, out.final_state.dtype, p.D * p.W, s);
}

void cp_conv_bwd_cuda(const CpContext& cp, const ConvInputs& in, const TensorView& dy, const TensorView& d_final_state,
                      const ConvGrads& grads, const ConvOptions& opt, const ExecContext& ctx) {
  cudacp::DeviceScope scope(in.x.device.index);
  const size_t need = plan(cp, in, opt, cudacp::kCountingBase, true).total;
  cudacp::Scratch ws(ctx, need, opt.use_graph, "conv");
  const ConvPlan p = plan(cp, in, opt, ws.base(), true);
  void* s = ctx.stream;
  const Device dev = in.x.device;
  const int64_t DW = p.D * p.W;
  forward_exchange(cp, in, p, s);
  const bool with_dht = opt.output_final_state && d_final_state.defined();
  dev::copy_states(p.L, dev::Pick::kEndsHere, true, with_dht ? d_final_state.data : nullptr, d_final_state.dtype,
                   p.dht, DType::kF32, DW, s);
  float* dw = p.prm;
  float* db = p.prm + DW;
  if (p.L.rows > 0) {
    ConvGrads vg = grads;
    vg.dinitial_state = states(p.dh0, DType::kF32, p, dev);
    if (grads.dweight.defined()) vg.dweight = TensorView::contiguous(dw, DType::kF32, {p.D, p.W}, dev);
    if (grads.dbias.defined()) vg.dbias = TensorView::contiguous(db, DType::kF32, {p.D}, dev);
    ExecContext c = ctx;
    c.workspace = p.inner;
    c.workspace_bytes = p.inner_bytes;
    conv_bwd(p.vin, dy, opt.output_final_state ? states(p.dht, DType::kF32, p, dev) : TensorView{}, vg, p.vopt, c);
  } else {  // only empty sequences here: dh0 = dht, no parameter gradient
    cudacp::copy_async(p.dh0, p.dht, sizeof(float) * p.N * DW, s);
    cudacp::memset_async(p.prm, sizeof(float) * (DW + p.D), s);
  }
  // Each head's initial-state gradient goes back to the rows / h0 slots it came from.
  dev::conv_head_grad(p.L, p.dh0, p.D, p.W, p.rec2, s);
  cp.comm->all_gather(p.rec2, p.all2, sizeof(float) * DW, s);
  if (grads.dx.defined() && p.L.rows > 0)
    dev::conv_scatter_dx(p.L, p.all2, grads.dx.data, grads.dx.dtype, grads.dx.strides[1], p.D, p.W, s);
  if (grads.dinitial_state.defined())
    dev::conv_dinit(p.L, p.all2, p.dh0, grads.dinitial_state.data, grads.dinitial_state.dtype, p.D, p.W, s);
  if (!grads.dweight.defined() && !grads.dbias.defined()) return;
  const int64_t stride = DW + p.D;
  const float* src = p.prm;
  int parts = 1;
  if (cp.reduce_param_grads) {
    cp.comm->all_gather(p.prm, p.allp, sizeof(float) * stride, s);
    src = p.allp;
    parts = p.world;
  }
  if (grads.dweight.defined()) dev::sum_ranks(src, parts, stride, DW, grads.dweight.data, grads.dweight.dtype, s);
  if (grads.dbias.defined()) dev::sum_ranks(src + DW, parts, stride, p.D, grads.dbias.data, grads.dbias.dtype, s);
}

}  // namespace linattn::parallel
#endif

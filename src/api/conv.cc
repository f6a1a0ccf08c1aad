// Bodies of linattn::conv_fwd / conv_bwd / conv_bwd_workspace_bytes: validate (meta) -> build
// ConvParams -> run on the tensors' backend. CPU work goes through run_or_record, so a CPU graph
// capture records it; the recorded work reads cu_seqlens (and validates it) when it runs.
// Capture rules: see check_capture.
#include <vector>

#include "core/capture.h"
#include "core/check.h"
#include "cpu/conv_cpu.h"
#include "meta/chunk_attn_desc.h"
#include "meta/conv_desc.h"

#if LINATTN_WITH_CUDA
#include "cuda/conv/conv_cuda.h"
#endif

namespace linattn {

namespace {

meta::ConvRows rows_view(const TensorView& t) {
  if (!t.defined()) return {};
  return {t.data, t.strides[0], t.strides[1]};
}

meta::ConvParams make_params(const meta::ConvDesc& d, const ConvInputs& in) {
  meta::ConvParams p;
  p.B = d.B;
  p.T = d.T;
  p.D = d.D;
  p.W = d.W;
  p.N = d.N;
  p.varlen = d.varlen;
  p.silu = d.act == Activation::kSilu;
  p.dtype = d.dtype;
  p.cu = d.varlen ? in.cu_seqlens.data : nullptr;
  p.cu_dtype = d.cu_dtype;
  p.x = rows_view(in.x);
  p.weight = in.weight.data;
  p.w_dtype = d.w_dtype;
  p.bias = d.has_bias ? in.bias.data : nullptr;
  p.b_dtype = d.b_dtype;
  p.residual = rows_view(in.residual);
  p.h0 = d.has_h0 ? in.initial_state.data : nullptr;
  p.h0_dtype = d.h0_dtype;
  return p;
}

// Capture rules (graph.h): the eager path is never recorded (eager-backend), CUDA tensors cannot
// be recorded by a CPU capture (address-or-lifetime), and a CUDA stream under capture takes
// only the fixed-capacity path.
void check_capture(const meta::ConvDesc& d, const char* op, const ExecContext& ctx) {
  if (!d.use_graph) forbid_eager_during_capture(op);
  if (d.device.type != DeviceType::kCUDA) return;
  forbid_during_capture(op, FailureCategory::kAddressOrLifetime);
#if LINATTN_WITH_CUDA
  LINATTN_CHECK_CODE(d.use_graph || !cuda::stream_is_capturing(ctx.stream), ErrorCode::kCaptureViolation,
                     FailureCategory::kEagerBackend, op,
                     ": use_graph: expected true while the CUDA stream is being captured, got false");
#else
  (void)ctx;
#endif
}

// Runs CPU work now or records it. The eager path validates cu_seqlens (exact size) first; the
// fixed-capacity path never reads it at call time: the kernels read it when they run and clamp
// every offset into [0, T], so garbage offsets cannot address outside the tensors.
template <class Fn>
void run_cpu(const meta::ConvDesc& d, const ConvInputs& in, const char* name, Fn work) {
  if (d.varlen && !d.use_graph) meta::validate_cu_seqlens_host(in.cu_seqlens, d.T, false);
  run_or_record(name, std::move(work));
}

void check_kernel_dtype(const meta::ConvDesc& d, const char* op) {
  if (d.dtype == DType::kF64)
    LINATTN_UNSUPPORTED(op, ": x dtype fp64 is reference-only; kernels take fp32, bf16 or fp16");
}

#if !LINATTN_WITH_CUDA
[[noreturn]] void no_cuda(const char* op) {
  LINATTN_UNSUPPORTED(op, ": backend cuda: this build has no CUDA backend (LINATTN_ENABLE_CUDA=OFF)");
}
#endif

}  // namespace

void conv_fwd(const ConvInputs& in, const ConvOutputs& out, const ConvOptions& opt, const ExecContext& ctx) {
  const meta::ConvDesc d = meta::describe_conv(in, opt);
  meta::check_conv_fwd_outputs(d, out);
  check_capture(d, "conv_fwd", ctx);
  check_kernel_dtype(d, "conv_fwd");
  meta::ConvParams p = make_params(d, in);
  p.y = rows_view(out.y);
  p.ht = d.has_ht ? out.final_state.data : nullptr;
  if (d.device.type == DeviceType::kCUDA) {
#if LINATTN_WITH_CUDA
    cuda::conv_fwd(p, ctx.stream);
    return;
#else
    no_cuda("conv_fwd");
#endif
  }
  const int threads = ctx.num_threads;
  run_cpu(d, in, "conv_fwd", [p, threads] { cpu::conv_fwd(p, threads); });
}

size_t conv_bwd_workspace_bytes(const ConvInputs& in, const ConvOptions& opt) {
  return meta::conv_bwd_workspace_bytes(meta::describe_conv(in, opt));
}

void conv_bwd(const ConvInputs& in, const TensorView& dy, const TensorView& d_final_state,
              const ConvGrads& grads, const ConvOptions& opt, const ExecContext& ctx) {
  const meta::ConvDesc d = meta::describe_conv(in, opt);
  meta::check_conv_bwd_args(d, dy, d_final_state, grads);
  check_capture(d, "conv_bwd", ctx);
  check_kernel_dtype(d, "conv_bwd");
  meta::ConvParams p = make_params(d, in);
  p.dy = rows_view(dy);
  p.dht = d_final_state.defined() ? d_final_state.data : nullptr;
  p.dht_dtype = d_final_state.dtype;
  p.dx = rows_view(grads.dx);
  p.dres = rows_view(grads.dresidual);
  p.dweight = grads.dweight.defined() ? grads.dweight.data : nullptr;
  p.dw_dtype = grads.dweight.dtype;
  p.dbias = grads.dbias.defined() ? grads.dbias.data : nullptr;
  p.db_dtype = grads.dbias.dtype;
  p.dh0 = grads.dinitial_state.defined() ? grads.dinitial_state.data : nullptr;
  p.dh0_dtype = grads.dinitial_state.dtype;

  const bool want_sums = p.dweight || p.dbias;
  const size_t need = meta::conv_bwd_workspace_bytes(d);
  const bool have_ws = ctx.workspace != nullptr && ctx.workspace_bytes >= need &&
                       reinterpret_cast<uintptr_t>(ctx.workspace) % 16 == 0;
  if (want_sums && have_ws) p.partials = static_cast<float*>(ctx.workspace);
  if (want_sums && d.use_graph)
    LINATTN_CHECK_CODE(have_ws, ErrorCode::kInvalidArgument, FailureCategory::kAddressOrLifetime,
                       "workspace: expected at least ", need,
                       " bytes, 16-byte aligned (conv_bwd_workspace_bytes) with use_graph = true, got ",
                       ctx.workspace_bytes, " bytes at ", ctx.workspace);
  if (d.device.type == DeviceType::kCUDA) {
#if LINATTN_WITH_CUDA
    cuda::conv_bwd(p, ctx.stream);
    return;
#else
    no_cuda("conv_bwd");
#endif
  }
  const int threads = ctx.num_threads;
  const int64_t floats = meta::conv_bwd_partials_floats(d);
  run_cpu(d, in, "conv_bwd", [p, threads, want_sums, floats] {
    meta::ConvParams q = p;
    std::vector<float> own;  // eager call without workspace only (graph mode checked above)
    if (want_sums && !q.partials) {
      own.resize(static_cast<size_t>(floats));
      q.partials = own.data();
    }
    cpu::conv_bwd(q, threads);
  });
}

}  // namespace linattn

// CUDA backend entry points (see backend_cuda.h). Without CUDA they raise Unsupported.
// With CUDA: GDN forward builds cuda::GdnFwdParams from the validated descriptor, plans on the
// tensors' device (SM count read at run time) and runs on the caller's stream. The eager path
// (use_graph = false) may take its workspace from linattn's eager pool (cuda/common/eager_pool.h) on that stream when the caller
// passes none; the fixed-capacity path (use_graph = true) never allocates: a missing or short
// workspace is an address-or-lifetime error. The GDN backward (chunk_attn_bwd_cuda) follows the
// same rules with its own workspace (cuda/gdn/gdn_bwd.h); it also takes KDA (per-channel gate
// policy of the same kernels). The forward takes KDA through the same plan and kernels as GDN
// (GdnFwdParams::kda: per-key-channel gate policy).
// Tier 3 (ChunkAttnOptions::segments, plan/cuda_seg_plan.h): forward and backward run the
// segmented drivers of cuda/seg/tier3.h when the planner or the caller picks segments > 1 (never
// on the forced token-by-token path); the workspace functions size for the same choice.
#include "api/backend_cuda.h"

#include "core/check.h"

#if LINATTN_WITH_CUDA
#include <cuda_runtime.h>


#include "cuda/common/check.h"
#include "cuda/common/device_info.h"
#include "cuda/common/eager_pool.h"
#include "cuda/gdn/gdn_bwd.h"
#include "cuda/gdn/gdn_fwd.h"
#include "cuda/gdn/gdn_prep_cache.h"
#include "cuda/meta/chunk_meta.h"
#include "meta/workspace.h"
#include "cuda/seg/tier3.h"
#include "plan/cuda_seg_plan.h"
#endif

namespace linattn::api {

#if !LINATTN_WITH_CUDA
void chunk_attn_fwd_cuda(const meta::ChunkAttnDesc&, const ChunkAttnInputs&, const ChunkAttnOutputs&,
                         const ChunkAttnOptions&, const ExecContext&) {
  LINATTN_UNSUPPORTED("backend cuda: this build has no CUDA backend (LINATTN_ENABLE_CUDA=OFF)");
}
void chunk_attn_fwd_cuda_forced(const meta::ChunkAttnDesc&, const ChunkAttnInputs&,
                                const ChunkAttnOutputs&, const ChunkAttnOptions&, const ExecContext&,
                                CudaGdnPath, int) {
  LINATTN_UNSUPPORTED("backend cuda: this build has no CUDA backend (LINATTN_ENABLE_CUDA=OFF)");
}
size_t chunk_attn_fwd_workspace_bytes_cuda(const meta::ChunkAttnDesc&, const ChunkAttnInputs&,
                                           const ChunkAttnOptions&) {
  LINATTN_UNSUPPORTED("backend cuda: this build has no CUDA backend (LINATTN_ENABLE_CUDA=OFF)");
}
void chunk_attn_bwd_cuda(const meta::ChunkAttnDesc&, const ChunkAttnInputs&, const TensorView&,
                         const TensorView&, const ChunkAttnGrads&, const ChunkAttnOptions&,
                         const ExecContext&) {
  LINATTN_UNSUPPORTED("backend cuda: this build has no CUDA backend (LINATTN_ENABLE_CUDA=OFF)");
}
void chunk_attn_bwd_cuda_forced(const meta::ChunkAttnDesc&, const ChunkAttnInputs&, const TensorView&,
                                const TensorView&, const ChunkAttnGrads&, const ChunkAttnOptions&,
                                const ExecContext&, CudaGdnPath, int) {
  LINATTN_UNSUPPORTED("backend cuda: this build has no CUDA backend (LINATTN_ENABLE_CUDA=OFF)");
}
size_t chunk_attn_bwd_workspace_bytes_cuda(const meta::ChunkAttnDesc&, const ChunkAttnInputs&,
                                           const ChunkAttnOptions&) {
  LINATTN_UNSUPPORTED("backend cuda: this build has no CUDA backend (LINATTN_ENABLE_CUDA=OFF)");
}
int chunk_attn_cuda_segments(const meta::ChunkAttnDesc&, const ChunkAttnInputs&, const ChunkAttnOptions&,
                             std::string*) {
  LINATTN_UNSUPPORTED("backend cuda: this build has no CUDA backend (LINATTN_ENABLE_CUDA=OFF)");
}
size_t chunk_attn_saved_bytes_cuda(const meta::ChunkAttnDesc&, const ChunkAttnInputs&, const ChunkAttnOptions&) {
  LINATTN_UNSUPPORTED("backend cuda: this build has no CUDA backend (LINATTN_ENABLE_CUDA=OFF)");
}
#else
namespace {

cuda::ElemType elem_type(DType t, const char* name) {
  switch (t) {
    case DType::kF32: return cuda::ElemType::kF32;
    case DType::kF16: return cuda::ElemType::kF16;
    case DType::kBF16: return cuda::ElemType::kBF16;
    default: LINATTN_UNSUPPORTED("backend cuda: ", name, " dtype ", dtype_name(t), " (supported: fp32, fp16, bf16)");
  }
}

// Restores the caller's current device on scope exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int ordinal) {
    LINATTN_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != ordinal) LINATTN_CUDA_CHECK(cudaSetDevice(ordinal));
  }
  ~DeviceGuard() { (void)cudaSetDevice(prev_); }

 private:
  int prev_ = 0;
};

cuda::GdnFwdParams build_params(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                                const ChunkAttnOutputs* out) {
  LINATTN_CHECK(d.device.type == DeviceType::kCUDA, "backend cuda: tensors on ", device_name(d.device));
  cuda::GdnFwdParams p;
  p.T_total = d.B * d.T;
  p.T_seq = d.varlen ? 0 : d.T;
  LINATTN_CHECK(d.N < (int64_t(1) << 31) && d.HV <= 65535, "backend cuda: N = ", d.N, ", HV = ", d.HV,
                " exceed the launch limits");
  p.N = static_cast<int>(d.N);
  p.H = static_cast<int>(d.H);
  p.HV = static_cast<int>(d.HV);
  p.K = static_cast<int>(d.K);
  p.V = static_cast<int>(d.V);
  if (p.K > 256) LINATTN_UNSUPPORTED("backend cuda: K = ", p.K, " (supported: K <= 256)");
  p.BT = d.BT;
  p.scale = static_cast<float>(d.scale);
  p.io = elem_type(d.dtype, "q");
  LINATTN_CHECK(d.v_dtype == d.dtype, "v: expected dtype ", dtype_name(d.dtype), " (q's) on CUDA, got ",
                dtype_name(d.v_dtype));
  p.g_type = elem_type(d.g_dtype, "g");
  p.beta_type = elem_type(d.beta_dtype, "beta");
  p.l2norm = d.l2norm;
  p.gate_in_kernel = d.gate_in_kernel;
  p.beta_sigmoid = d.beta_sigmoid;
  p.neg_eigval = d.neg_eigval;
  p.state_v_first = d.state_v_first;
  p.kda = d.kda();
  p.has_lower_bound = d.has_lower_bound;
  p.lower_bound = static_cast<float>(d.lower_bound);
  p.q = in.q.data;
  p.k = in.k.data;
  p.v = in.v.data;
  p.g = in.g.data;
  p.beta = in.beta.data;
  if (d.has_A_log) {
    LINATTN_CHECK(in.A_log.dtype == DType::kF32, "A_log: expected dtype fp32 on CUDA, got ", dtype_name(in.A_log.dtype));
    p.A_log = in.A_log.ptr<const float>();
  }
  if (d.has_dt_bias) {
    LINATTN_CHECK(in.dt_bias.dtype == DType::kF32, "dt_bias: expected dtype fp32 on CUDA, got ",
                  dtype_name(in.dt_bias.dtype));
    p.dt_bias = in.dt_bias.ptr<const float>();
  }
  if (d.has_h0) {
    p.h0 = in.initial_state.data;
    p.h0_type = elem_type(in.initial_state.dtype, "initial_state");
  }
  if (d.varlen) {
    p.cu_seqlens = in.cu_seqlens.data;
    p.cu_i64 = d.cu_dtype == DType::kI64;
  }
  if (out) {
    p.o = out->o.data;
    if (d.has_ht) p.ht = out->final_state.ptr<float>();
  }
  return p;
}

bool aligned16(const cuda::GdnFwdParams& p) {
  auto ok = [](const void* x) { return (reinterpret_cast<uintptr_t>(x) & 15) == 0; };
  return ok(p.q) && ok(p.k) && ok(p.v) && ok(p.o);
}

cuda::GdnFwdPlan plan_for(const meta::ChunkAttnDesc& d, const cuda::GdnFwdParams& p) {
  return cuda::plan_gdn_fwd(p, cuda::device_info(d.device.index).sm_count, aligned16(p));
}

// Graph-mode chunk tables: [NT_max, 2] and [N_max + 1], int32, on the op's device.
void check_tables(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in, int64_t nt_max) {
  LINATTN_CHECK_CODE(in.chunk_indices.defined() && in.chunk_offsets.defined(), ErrorCode::kInvalidArgument,
                     FailureCategory::kStaleOrDynamicMetadata,
                     "chunk_indices / chunk_offsets: pass both or neither");
  for (const TensorView* t : {&in.chunk_indices, &in.chunk_offsets}) {
    const bool idx = t == &in.chunk_indices;
    const char* name = idx ? "chunk_indices" : "chunk_offsets";
    meta::expect_dtype(*t, name, DType::kI32);
    meta::expect_device(*t, name, d.device);
    meta::expect_contiguous(*t, name);
    if (idx) {
      meta::expect_rank(*t, name, 2);
      meta::expect_dim(*t, name, 0, nt_max);
      meta::expect_dim(*t, name, 1, 2);
    } else {
      meta::expect_rank(*t, name, 1);
      meta::expect_dim(*t, name, 0, d.N + 1);
    }
  }
}

// Tier-3 choice of a call (segments 1: off). `aligned`: as plan_for's.
cuda::seg::Tier3Config tier3_config(const meta::ChunkAttnDesc& d, const cuda::GdnFwdParams& p,
                                    const ChunkAttnOptions& opt, bool aligned, int vs) {
  const bool ok = cuda::seg::tier3_supported(p, aligned, nullptr);
  const int sm = cuda::device_info(d.device.index).sm_count;
  const plan::CudaSegPlan sp = plan::plan_cuda_segments(d, sm, opt.segments, ok);
  cuda::seg::Tier3Config c;
  c.segments = sp.segments;
  c.min_segment = sp.min_segment;
  c.sm_count = sm;
  c.vs = vs;
  return c;
}

// Runs fn(workspace, bytes) with the caller's workspace, or (eager only) a stream-ordered one.
template <class Fn>
void with_workspace(const meta::ChunkAttnDesc& d, const ExecContext& ctx, size_t need, const char* what, Fn fn) {
  auto stream = static_cast<cudaStream_t>(ctx.stream);
  if (need == 0 || ctx.workspace_bytes >= need) {
    fn(ctx.workspace, ctx.workspace_bytes);
    return;
  }
  LINATTN_CHECK_CODE(!d.use_graph, ErrorCode::kInvalidArgument, FailureCategory::kAddressOrLifetime,
                     "workspace: use_graph = true needs a caller workspace of at least ", need, " bytes (", what,
                     "), got ", ctx.workspace_bytes);
  void* ws = cuda::eager_alloc(need, stream);
  try {
    fn(ws, need);
  } catch (...) {
    (void)cudaFreeAsync(ws, stream);
    throw;
  }
  cuda::eager_free(ws, stream);
}

// The caller's graph-mode chunk tables describe the current layout after every call, also when
// tier 3 (which builds its own segment tables) runs.
void refresh_tables(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in, const cuda::GdnFwdParams& p,
                    cudaStream_t stream) {
  if (!d.graph_chunk_tables) return;
  const int64_t cap = cuda::gdn_chunk_capacity(p, p.BT);
  check_tables(d, in, cap);
  if (p.cu_seqlens)
    cuda::build_chunk_meta(p.cu_seqlens, p.cu_i64, p.N, p.T_total, p.BT, cap, in.chunk_indices.ptr<int32_t>(),
                           in.chunk_offsets.ptr<int32_t>(), stream);
}

// The training cache of a call (0: none): a chunked backward whose prep a chunked forward with P in its
// prep computes identically (same plan BT and chunk capacity); never with tier 3 or a token path.
size_t saved_bytes_for(const meta::ChunkAttnDesc& d, const cuda::GdnFwdParams& p, const ChunkAttnOptions& opt) {
  if (tier3_config(d, p, opt, aligned16(p), 0).segments > 1) return 0;
  const int sm = cuda::device_info(d.device.index).sm_count;
  const cuda::GdnFwdPlan fp = cuda::plan_gdn_fwd(p, sm, aligned16(p));
  const cuda::GdnBwdPlan bp = cuda::plan_gdn_bwd(p, sm, aligned16(p));
  if (!bp.chunked || !cuda::gdn_fwd_fills_prep_cache(p, fp) || fp.BT != bp.BT || fp.nt_cap != bp.nt_cap) return 0;
  return cuda::gdn_prep_cache_bytes(p, bp.BT, bp.nt_cap);
}

}  // namespace

size_t chunk_attn_saved_bytes_cuda(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                                   const ChunkAttnOptions& opt) {
  DeviceGuard guard(d.device.index);
  return saved_bytes_for(d, build_params(d, in, nullptr), opt);
}

int chunk_attn_cuda_segments(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in, const ChunkAttnOptions& opt,
                             std::string* reason) {
  DeviceGuard guard(d.device.index);
  const cuda::GdnFwdParams p = build_params(d, in, nullptr);
  const bool ok = cuda::seg::tier3_supported(p, aligned16(p), nullptr);
  const plan::CudaSegPlan sp =
      plan::plan_cuda_segments(d, cuda::device_info(d.device.index).sm_count, opt.segments, ok);
  if (reason) *reason = sp.reason;
  return sp.segments;
}

size_t chunk_attn_fwd_workspace_bytes_cuda(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                                           const ChunkAttnOptions& opt) {
  DeviceGuard guard(d.device.index);
  cuda::GdnFwdParams p = build_params(d, in, nullptr);
  if (d.has_ht) p.ht = reinterpret_cast<float*>(uintptr_t(16));  // sizing only: final states wanted
  const cuda::seg::Tier3Config t3 = tier3_config(d, p, opt, true, 0);
  if (t3.segments > 1) return cuda::seg::tier3_fwd_workspace_bytes(p, t3);
  // Alignment of o is unknown here: size for the chunked plan whenever the shape allows it.
  const cuda::GdnFwdPlan plan = cuda::plan_gdn_fwd(p, cuda::device_info(d.device.index).sm_count, true);
  return cuda::gdn_fwd_workspace_bytes(p, plan, d.graph_chunk_tables);
}

void chunk_attn_fwd_cuda(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                         const ChunkAttnOutputs& out, const ChunkAttnOptions& opt, const ExecContext& ctx) {
  chunk_attn_fwd_cuda_forced(d, in, out, opt, ctx, CudaGdnPath::kAuto, 0);
}

void chunk_attn_fwd_cuda_forced(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                                const ChunkAttnOutputs& out, const ChunkAttnOptions& opt,
                                const ExecContext& ctx, CudaGdnPath path, int vs) {
  DeviceGuard guard(d.device.index);
  meta::check_fwd_outputs(d, out);
  auto stream = static_cast<cudaStream_t>(ctx.stream);
  if (!d.use_graph) {  // the eager path is not capturable by contract (it may allocate)
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    LINATTN_CUDA_CHECK(cudaStreamIsCapturing(stream, &cs));
    LINATTN_CHECK_CODE(cs == cudaStreamCaptureStatusNone, ErrorCode::kCaptureViolation,
                       FailureCategory::kEagerBackend,
                       "chunk_attn_fwd: use_graph = false (eager path) while a CUDA stream capture is "
                       "active; pass use_graph = true with a workspace");
  }
  const cuda::GdnFwdParams p = build_params(d, in, &out);
  if (path != CudaGdnPath::kRecurrent) {
    const cuda::seg::Tier3Config t3 = tier3_config(d, p, opt, aligned16(p), vs);
    if (t3.segments > 1) {
      refresh_tables(d, in, p, stream);
      with_workspace(d, ctx, cuda::seg::tier3_fwd_workspace_bytes(p, t3), "chunk_attn workspace size",
                     [&](void* ws, size_t bytes) { cuda::seg::tier3_fwd(p, t3, ws, bytes, stream); });
      return;
    }
  }
  cuda::GdnFwdPlan plan = plan_for(d, p);
  if (path == CudaGdnPath::kRecurrent) {
    plan.chunked = false;
    plan.reason = "forced token-by-token";
  } else if (path == CudaGdnPath::kChunked) {
    LINATTN_CHECK(plan.chunked, "forced chunked path: this call cannot take it: ", plan.reason);
  }
  if (plan.chunked && vs > 0) plan.vs = vs;
  int32_t* ci = nullptr;
  int32_t* co = nullptr;
  if (d.graph_chunk_tables) {
    check_tables(d, in, cuda::gdn_chunk_capacity(p, p.BT));
    ci = in.chunk_indices.ptr<int32_t>();
    co = in.chunk_offsets.ptr<int32_t>();
  }
  void* cache = nullptr;  // the training cache, when this call has one (saved_bytes_for)
  if (out.saved != nullptr && path != CudaGdnPath::kRecurrent) {
    const size_t sb = saved_bytes_for(d, p, opt);
    if (sb > 0) {
      meta::check_workspace(out.saved, out.saved_bytes, sb, "saved");
      LINATTN_CHECK(cuda::gdn_fwd_fills_prep_cache(p, plan), "saved: this forward (forced V-slice ", plan.vs,
                    ") forms P in its fused kernel and cannot fill the training cache");
      cache = out.saved;
    }
  }
  const size_t need = cuda::gdn_fwd_workspace_bytes(p, plan, ci != nullptr);  // an upper bound with a cache
  with_workspace(d, ctx, need, "chunk_attn workspace size", [&](void* ws, size_t bytes) {
    cuda::gdn_fwd(p, plan, ci, co, ws, bytes, stream, cuda::GdnFwdStage::kAll, cache);
  });
}

namespace {

cuda::GradOut grad_out(const TensorView& t, const char* name) {
  if (!t.defined()) return {};
  return {t.data, elem_type(t.dtype, name)};
}

cuda::GdnBwdParams build_bwd_params(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                                    const TensorView& d_o, const TensorView& dht, const ChunkAttnGrads& g) {
  cuda::GdnBwdParams p;
  p.f = build_params(d, in, nullptr);  // KDA included: the gate policy travels in p.f (kda, lower_bound)
  p.d_o = d_o.data;
  p.do_type = elem_type(d_o.dtype, "d_o");
  if (dht.defined()) {
    p.dht = dht.data;
    p.dht_type = elem_type(dht.dtype, "d_final_state");
  }
  p.dq = grad_out(g.dq, "dq");
  p.dk = grad_out(g.dk, "dk");
  p.dv = grad_out(g.dv, "dv");
  p.dg = grad_out(g.dg, "dg");
  p.dbeta = grad_out(g.dbeta, "dbeta");
  p.dA_log = grad_out(g.dA_log, "dA_log");
  p.ddt_bias = grad_out(g.ddt_bias, "ddt_bias");
  p.dh0 = grad_out(g.dinitial_state, "dinitial_state");
  return p;
}

}  // namespace

size_t chunk_attn_bwd_workspace_bytes_cuda(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                                           const ChunkAttnOptions& opt) {
  DeviceGuard guard(d.device.index);
  const cuda::GdnFwdParams p = build_params(d, in, nullptr);
  const cuda::seg::Tier3Config t3 = tier3_config(d, p, opt, true, 0);
  if (t3.segments > 1) {
    cuda::GdnBwdParams bp;
    bp.f = p;
    bp.dh0.p = reinterpret_cast<void*>(uintptr_t(16));  // sizing only: the largest case (dh0 wanted)
    return cuda::seg::tier3_bwd_workspace_bytes(bp, t3);  // sized for aligned tensors, as below
  }
  const cuda::GdnBwdPlan plan = cuda::plan_gdn_bwd(p, cuda::device_info(d.device.index).sm_count, true);
  const bool cached = in.saved != nullptr && saved_bytes_for(d, p, opt) > 0;  // as chunk_attn_bwd_cuda decides
  return cuda::gdn_bwd_workspace_bytes(p, plan, d.graph_chunk_tables, cached);
}

void chunk_attn_bwd_cuda(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in, const TensorView& d_o,
                         const TensorView& d_final_state, const ChunkAttnGrads& grads,
                         const ChunkAttnOptions& opt, const ExecContext& ctx) {
  chunk_attn_bwd_cuda_forced(d, in, d_o, d_final_state, grads, opt, ctx, CudaGdnPath::kAuto, 0);
}

void chunk_attn_bwd_cuda_forced(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in, const TensorView& d_o,
                                const TensorView& d_final_state, const ChunkAttnGrads& grads,
                                const ChunkAttnOptions& opt, const ExecContext& ctx, CudaGdnPath path, int vs) {
  DeviceGuard guard(d.device.index);
  meta::check_bwd_args(d, d_o, d_final_state, grads);
  auto stream = static_cast<cudaStream_t>(ctx.stream);
  if (!d.use_graph) {  // the eager path is not capturable by contract (it may allocate)
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    LINATTN_CUDA_CHECK(cudaStreamIsCapturing(stream, &cs));
    LINATTN_CHECK_CODE(cs == cudaStreamCaptureStatusNone, ErrorCode::kCaptureViolation,
                       FailureCategory::kEagerBackend,
                       "chunk_attn_bwd: use_graph = false (eager path) while a CUDA stream capture is "
                       "active; pass use_graph = true with a workspace");
  }
  const cuda::GdnBwdParams p = build_bwd_params(d, in, d_o, d_final_state, grads);
  if (path != CudaGdnPath::kRecurrent) {
    const cuda::seg::Tier3Config t3 = tier3_config(d, p.f, opt, aligned16(p.f), vs);
    if (t3.segments > 1) {
      refresh_tables(d, in, p.f, stream);
      with_workspace(d, ctx, cuda::seg::tier3_bwd_workspace_bytes(p, t3), "chunk_attn_bwd_workspace_bytes",
                     [&](void* ws, size_t bytes) { cuda::seg::tier3_bwd(p, t3, ws, bytes, stream); });
      return;
    }
  }
  cuda::GdnBwdPlan plan = cuda::plan_gdn_bwd(p.f, cuda::device_info(d.device.index).sm_count, aligned16(p.f));
  if (path == CudaGdnPath::kRecurrent) {
    plan.chunked = false;
    plan.reason = "forced token-by-token";
  } else if (path == CudaGdnPath::kChunked) {
    LINATTN_CHECK(plan.chunked, "forced chunked path: this call cannot take it: ", plan.reason);
  }
  if (plan.chunked && vs > 0) plan.vs = vs;
  int32_t* ci = nullptr;
  int32_t* co = nullptr;
  if (d.graph_chunk_tables) {
    check_tables(d, in, cuda::gdn_chunk_capacity(p.f, p.f.BT));
    ci = in.chunk_indices.ptr<int32_t>();
    co = in.chunk_offsets.ptr<int32_t>();
  }
  const void* cache = nullptr;  // the forward's training cache, when this call has one (saved_bytes_for)
  if (in.saved != nullptr && plan.chunked) {
    const size_t sb = saved_bytes_for(d, p.f, opt);
    if (sb > 0) {
      meta::check_workspace(in.saved, in.saved_bytes, sb, "saved");
      cache = in.saved;
    }
  }
  const size_t need = cuda::gdn_bwd_workspace_bytes(p.f, plan, ci != nullptr, cache != nullptr);
  with_workspace(d, ctx, need, "chunk_attn_bwd_workspace_bytes", [&](void* ws, size_t bytes) {
    cuda::gdn_bwd(p, plan, ci, co, ws, bytes, stream, cuda::GdnBwdStage::kAll, cache);
  });
}
#endif

}  // namespace linattn::api

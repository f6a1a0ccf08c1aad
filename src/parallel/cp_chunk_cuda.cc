// Context-parallel GDN / KDA on CUDA tensors (see cp_ops.h, cp_cuda.h). Per rank, on ctx.stream,
// no host reads of device data; sequence n keeps index n in the rank's virtual layout (vcu).
// Two exchanges, env LINATTN_CP_CHAIN (default 0; read per call, so every rank must see the same).
// The default is the first version: on 2 H200s the chained forward measured slower (0.52-0.54x of
// one GPU vs 0.73-0.76x, bench/results/h200x2-cp-20261130-7bf64cf.jsonl: the widened V + K forward
// costs about a whole-sequence forward), fwd + bwd within 2-5% either way.
// Chained (LINATTN_CP_CHAIN=1; the CPU twin is cp_chunk_chain.cc, the math docs/perf-notes.md "Chained
// exchange"): forward with one all-gather after each rank's only big pass: rank 0 runs its
// forward (its tail's record: the true final state); ranks > 0 run the forward on the augmented
// value width V + K (cp_dev_chain.cu: head from [0 | I], others [h0 | 0]), record the tail's true
// final state (it starts here) or (M, S_loc) (the rank is crossed whole), then, after the
// exchange, chain the head's S_init (absolute from its start rank) and correct o += Qt S_init
// (a cuBLAS GEMM per value head; a SIMT kernel when capturing on a stream without a cuBLAS
// context) and the head's final state. Backward: the first version's records, both computed
// before one all-gather (tail (M, S_loc) on ranks < world - 1, the head's dS by the dS stage on
// ranks > 0), so the ranks' passes overlap; needs the dS stage (else the first version runs).
// First version (default, LINATTN_CP_CHAIN=0):
// Forward: state pass over this rank's tail segment -> record (M, S_loc) -> all-gather ->
// h0_local = the global initial states, the head's chained over the earlier ranks
// (S <- M_r S + S_r) -> the CUDA chunk_attn_fwd on the rank's rows -> final states of the
// sequences ending here. The state pass is tier 3's chunked one (cuda/seg, when built in and
// the shape is supported: K = 128, V % 32 == 0, bf16 / fp16, BT 32 / 64, 16-byte aligned) or
// the token-by-token fallback (cp_dev_chunk.cu).
// Backward: the forward exchange again; ranks > 0 (which may hold a head) record the state
// gradient at their first row from everything after it on the rank, with the terminal gradients
// of the sequences ending here and zero for the tail (the head's dS_loc when the head crosses
// the rank, its full dS when it ends here): by tier 3's dS stage of the CUDA backward
// (GdnBwdStage::kDState, prep + reverse sweeps, when built in: LINATTN_CP_CUDA_DSTATE), else by
// a full chunk_attn_bwd ("phase A"); those are all-gathered; the tail's terminal gradient is
// chained back over the later ranks (d <- M_r^T d + D_r, with the forward records' M), then
// chunk_attn_bwd runs ("phase B": every rank with the dS stage; without it ranks < world - 1, so
// with 2 ranks rank 0's backward waits for rank 1's). Parameter gradients: the last run's
// partial, all-gathered and summed in rank order.
#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/env.h"
#include "core/util.h"
#include "parallel/cp_cuda.h"

#if LINATTN_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/common/device_info.h"
#include "cuda/dense/dense_cuda.h"
#include "meta/chunk_attn_desc.h"
#if LINATTN_CP_CUDA_SEG
#include "cuda/seg/seg_pass.h"
#endif
#if LINATTN_CP_CUDA_DSTATE
#include "cuda/gdn/gdn_bwd.h"
#endif

namespace linattn::parallel {
namespace {

struct ChunkPlan {
  dev::Layout L;
  dev::StateDims sd;
  int64_t N = 1, nA = 0, nB = 0;  // sequences, A_log / dt_bias entries
  int world = 1;
  int64_t* vcu = nullptr;
  int32_t* seg = nullptr;  // [8]: tail segment table (dev::virtual_cu)
  float *rec = nullptr, *all = nullptr, *h0 = nullptr, *ht = nullptr;
  float *dht = nullptr, *dh0 = nullptr, *drec = nullptr, *dall = nullptr, *prm = nullptr, *allp = nullptr;
  float *segS = nullptr, *segM = nullptr;  // tier-3 pass outputs, 2 slots
  void* seg_ws = nullptr;
  size_t seg_ws_bytes = 0;
  bool fast = false;
  bool dstate = false;  // backward records from the dS stage (else from a full phase-A backward)
  bool chain = false;   // the chained exchange (LINATTN_CP_CHAIN)
  bool aug = false;     // chained forward on a rank > 0: the augmented forward (A = V + K)
  void *v_aug = nullptr, *o_aug = nullptr, *Sb = nullptr;  // [rows, HV, A] x 2 (io), [HV, K, V] (io)
  float *h0_aug = nullptr, *ht_aug = nullptr, *Sinit = nullptr;  // [N, HV, K, A] x 2, [HV, K, V]
  ChunkAttnInputs ain;  // the augmented call
  ChunkAttnOptions aopt;
  void* inner = nullptr;
  size_t inner_bytes = 0, total = 0;
  ChunkAttnInputs vin;
  ChunkAttnOptions vopt;
  meta::ChunkAttnDesc d;
  std::vector<int64_t> state_shape() const {
    return sd.v_first ? std::vector<int64_t>{N, sd.HV, sd.V, sd.K} : std::vector<int64_t>{N, sd.HV, sd.K, sd.V};
  }
  int64_t A() const { return sd.V + sd.K; }
};

bool chained() { return env_flag("LINATTN_CP_CHAIN", false); }

#if LINATTN_CP_CUDA_SEG || LINATTN_CP_CUDA_DSTATE
cuda::ElemType elem(DType t) {
  return t == DType::kF32 ? cuda::ElemType::kF32 : t == DType::kF16 ? cuda::ElemType::kF16 : cuda::ElemType::kBF16;
}

// The CUDA parameters of this rank's rows (what api/backend_cuda.cc builds for the public op),
// without sequences.
cuda::GdnFwdParams rows_params(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in) {
  cuda::GdnFwdParams p;
  p.T_total = d.B * d.T;
  p.H = static_cast<int>(d.H);
  p.HV = static_cast<int>(d.HV);
  p.K = static_cast<int>(d.K);
  p.V = static_cast<int>(d.V);
  p.BT = d.BT;
  p.scale = static_cast<float>(d.scale);
  p.io = elem(d.dtype);
  p.g_type = elem(d.g_dtype);
  p.beta_type = elem(d.beta_dtype);
  p.l2norm = d.l2norm;
  p.gate_in_kernel = d.gate_in_kernel;
  p.beta_sigmoid = d.beta_sigmoid;
  p.neg_eigval = d.neg_eigval;
  p.kda = d.kda();
  p.has_lower_bound = d.has_lower_bound;
  p.lower_bound = static_cast<float>(d.lower_bound);
  p.q = in.q.data;
  p.k = in.k.data;
  p.v = in.v.data;
  p.g = in.g.data;
  p.beta = in.beta.data;
  if (d.has_A_log) p.A_log = in.A_log.ptr<const float>();
  if (d.has_dt_bias) p.dt_bias = in.dt_bias.ptr<const float>();
  return p;
}
#endif

#if LINATTN_CP_CUDA_SEG
// Tier 3's segment view of this rank's rows: two slots (cu = seg[0..3), flags = seg[3..5)).
cuda::GdnFwdParams seg_params(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in, const int32_t* seg) {
  cuda::GdnFwdParams p = rows_params(d, in);
  p.N = 2;
  p.cu_seqlens = seg;
  return p;
}

bool fast_pass_supported(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in) {
  auto a16 = [](const void* x) { return (reinterpret_cast<uintptr_t>(x) & 15) == 0; };
  return d.K == 128 && d.V % 32 == 0 && (d.dtype == DType::kBF16 || d.dtype == DType::kF16) &&
         (d.BT == 32 || d.BT == 64) && d.B * d.T < (int64_t{1} << 31) && a16(in.q.data) && a16(in.k.data) &&
         a16(in.v.data) && d.g_dtype == DType::kF32 && d.beta_dtype != DType::kF64;
}
#endif

#if LINATTN_CP_CUDA_DSTATE
// The dS stage of the CUDA backward (tier 3's GdnBwdStage::kDState: prep + reverse state sweeps
// only) over the rank's virtual sequences, terminal gradients p.dht: writes p.dh0, the state
// gradient at each virtual sequence's first row (the head's is the backward record).
cuda::GdnBwdParams dstate_params(const ChunkPlan& p, const TensorView& d_o) {
  cuda::GdnBwdParams b;
  b.f = rows_params(p.d, p.vin);
  b.f.N = static_cast<int>(p.N);
  b.f.cu_seqlens = p.vin.cu_seqlens.data;
  b.f.cu_i64 = true;
  b.f.h0 = p.vin.initial_state.data;
  b.f.h0_type = cuda::ElemType::kF32;
  b.f.state_v_first = p.sd.v_first;
  b.d_o = d_o.data;
  b.do_type = elem(d_o.dtype);
  b.dht = p.dht;
  b.dht_type = cuda::ElemType::kF32;
  b.dh0 = cuda::GradOut{p.dh0, cuda::ElemType::kF32};
  return b;
}

cuda::GdnBwdPlan dstate_plan(const ChunkPlan& p, const cuda::GdnFwdParams& f) {
  auto a16 = [](const void* x) { return (reinterpret_cast<uintptr_t>(x) & 15) == 0; };
  return cuda::plan_gdn_bwd(f, cuda::device_info(p.vin.q.device.index).sm_count, a16(f.q) && a16(f.k) && a16(f.v));
}
#endif

ChunkPlan plan(const CpContext& cp, const ChunkAttnInputs& in, const ChunkAttnOptions& opt, uintptr_t base,
               bool backward) {
#if LINATTN_CP_CUDA_DSTATE
  const bool chain = chained();  // the chained backward needs the dS stage
#else
  const bool chain = chained() && !backward;
#endif
  LINATTN_CHECK(in.q.defined() && in.v.defined(), "q, v: expected tensors, got none");
  ChunkPlan p;
  p.L = cudacp::open_call(cp, "chunk_attn", in.cu_seqlens, in.q, "q", 4);
  p.N = p.L.N;
  p.world = p.L.world;
  p.sd = dev::StateDims{in.v.shape[2], in.q.shape[3], in.v.shape[3], opt.state_v_first};
  p.nA = in.A_log.defined() ? in.A_log.numel() : 0;
  p.nB = in.dt_bias.defined() ? in.dt_bias.numel() : 0;
  const int64_t REC = p.sd.rec(), SK = p.sd.state(), NS = p.N * SK;
  p.chain = chain;
  cudacp::Carve c{base};
  p.vcu = c.take<int64_t>(static_cast<size_t>(p.N + 1));
  p.seg = c.take<int32_t>(8);
  // Chained backward: both records of a rank in one piece ([REC + SK] per rank, one all-gather).
  const int64_t R2 = chain && backward ? REC + SK : REC;
  p.rec = c.take<float>(R2);
  p.all = c.take<float>(p.world * R2);
  p.h0 = c.take<float>(NS);
  p.ht = c.take<float>(NS);
  if (backward) {
    p.dht = c.take<float>(NS);
    p.dh0 = c.take<float>(NS);
    p.drec = chain ? p.rec + REC : c.take<float>(SK);
    p.dall = chain ? p.all + REC : c.take<float>(p.world * SK);
    p.prm = c.take<float>(p.nA + p.nB);
    p.allp = c.take<float>(p.world * (p.nA + p.nB));
  }
  p.vin = in;
  p.vin.cu_seqlens = TensorView::contiguous(p.vcu, DType::kI64, {p.N + 1}, in.q.device);
  p.vin.initial_state = TensorView::contiguous(p.h0, DType::kF32, p.state_shape(), in.q.device);
  p.vin.chunk_indices = p.vin.chunk_offsets = TensorView{};
  p.vopt = opt;
  p.vopt.output_final_state = true;  // the final states of the sequences ending here
  p.vopt.max_num_seqs = p.N;
  if (p.L.rows == 0) {  // nothing runs on this rank but the exchanges
    p.total = c.used();
    return p;
  }
  p.d = meta::describe_chunk_attn(p.vin, p.vopt);
  p.aug = chain && !backward && p.L.rank > 0;
  if (p.aug) {  // the augmented forward's buffers and call
    const int64_t A = p.A(), rows = p.L.rows, HV = p.sd.HV, K = p.sd.K, V = p.sd.V;
    const size_t es = dtype_size(in.v.dtype);
    p.v_aug = c.take<char>(static_cast<size_t>(rows * HV * A) * es);
    p.o_aug = c.take<char>(static_cast<size_t>(rows * HV * A) * es);
    p.h0_aug = c.take<float>(p.N * HV * K * A);
    p.ht_aug = c.take<float>(p.N * HV * K * A);
    p.Sinit = c.take<float>(HV * K * V);
    p.Sb = c.take<char>(static_cast<size_t>(HV * K * V) * es);
    p.ain = p.vin;
    p.ain.v = TensorView::contiguous(p.v_aug, in.v.dtype, {1, rows, HV, A}, in.q.device);
    p.ain.initial_state = TensorView::contiguous(p.h0_aug, DType::kF32, {p.N, HV, K, A}, in.q.device);
    p.aopt = p.vopt;
    p.aopt.state_v_first = false;
    p.inner_bytes = chunk_attn_fwd_workspace_bytes(p.ain, p.aopt);
    p.inner = c.take<char>(p.inner_bytes);
    p.total = c.used();
    return p;
  }
#if LINATTN_CP_CUDA_SEG
  p.fast = fast_pass_supported(p.d, in) && !(chain && !backward);  // the chained forward has no state pass
  if (p.fast) {
    p.segS = c.take<float>(2 * SK);
    p.segM = c.take<float>(2 * p.sd.HV * p.sd.K * p.sd.K);
    const int sms = cuda::device_info(in.q.device.index).sm_count;
    p.seg_ws_bytes = cuda::seg::state_pass_workspace_bytes(seg_params(p.d, in, p.seg), sms);
    p.seg_ws = c.take<char>(p.seg_ws_bytes);
  }
#endif
  p.inner_bytes = backward ? chunk_attn_bwd_workspace_bytes(p.vin, p.vopt) : chunk_attn_fwd_workspace_bytes(p.vin, p.vopt);
#if LINATTN_CP_CUDA_DSTATE
  if (backward && p.L.rank > 0) {  // the dS stage runs in the inner op's workspace first
    p.dstate = true;
    const cuda::GdnFwdParams f = dstate_params(p, TensorView{}).f;
    p.inner_bytes = std::max(p.inner_bytes, cuda::gdn_bwd_workspace_bytes(f, dstate_plan(p, f), false));
  }
#endif
  p.inner = c.take<char>(p.inner_bytes);
  p.total = c.used();
  return p;
}

ExecContext inner_ctx(const ExecContext& ctx, const ChunkPlan& p) {
  ExecContext c = ctx;
  c.workspace = p.inner;
  c.workspace_bytes = p.inner_bytes;
  return c;
}

// S_loc and M of this rank's tail segment into p.rec.
void tail_pass(const ChunkPlan& p, const ChunkAttnInputs& in, void* s) {
#if LINATTN_CP_CUDA_SEG
  if (p.fast) {
    const int sms = cuda::device_info(in.q.device.index).sm_count;
    cuda::seg::state_pass(seg_params(p.d, in, p.seg), p.seg + 3, cuda::seg::kSegEmpty, p.segS, p.segM, sms, p.seg_ws,
                          p.seg_ws_bytes, s);
    const int64_t MK = p.sd.HV * p.sd.K * p.sd.K, SK = p.sd.state();
    cudacp::copy_async(p.rec, p.segM + MK, sizeof(float) * MK, s);  // slot 1: the tail
    cudacp::copy_async(p.rec + MK, p.segS + SK, sizeof(float) * SK, s);
    return;
  }
#endif
  const meta::ChunkAttnDesc& d = p.d;
  dev::TokenPass t;
  t.H = d.H;
  t.HV = d.HV;
  t.K = d.K;
  t.V = d.V;
  t.io = d.dtype;
  t.g_dt = d.g_dtype;
  t.beta_dt = d.beta_dtype;
  t.kda = d.kda();
  t.l2norm = d.l2norm;
  t.gate_in_kernel = d.gate_in_kernel;
  t.beta_sigmoid = d.beta_sigmoid;
  t.neg_eigval = d.neg_eigval;
  t.has_lower_bound = d.has_lower_bound;
  t.lower_bound = static_cast<float>(d.lower_bound);
  t.k = in.k.data;
  t.v = in.v.data;
  t.g = in.g.data;
  t.beta = in.beta.data;
  if (d.has_A_log) t.A_log = in.A_log.ptr<const float>();
  if (d.has_dt_bias) t.dt_bias = in.dt_bias.ptr<const float>();
  dev::token_state_pass(t, p.seg, p.rec, s);
}

// Before an exchange: the virtual layout, p.h0 = every sequence's initial state (the head's 0),
// and (first version, backward) the tail's (M, S_loc) record.
void exchange_pre(const ChunkAttnInputs& in, const ChunkPlan& p, bool tail, void* s) {
  dev::virtual_cu(p.L, p.vcu, p.seg, s);
  const TensorView& h0 = in.initial_state;
  dev::copy_states(p.L, dev::Pick::kAll, true, h0.defined() ? h0.data : nullptr, h0.dtype, p.h0, DType::kF32,
                   p.sd.state(), s);
  if (tail && p.L.rank < p.world - 1 && p.L.rows > 0) tail_pass(p, in, s);  // the last rank never has a tail
}

// The first version's forward exchange: p.h0 = every sequence's initial state, the head's chained.
void forward_exchange(const CpContext& cp, const ChunkAttnInputs& in, const ChunkPlan& p, void* s) {
  exchange_pre(in, p, true, s);
  cp.comm->all_gather(p.rec, p.all, sizeof(float) * p.sd.rec(), s);
  if (p.L.rank > 0) dev::chunk_head_state(p.L, p.sd, p.all, p.sd.rec(), p.h0, false, nullptr, s);
}

bool capturing(void* s) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(static_cast<cudaStream_t>(s), &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone;
}

// The chained forward (file comment). p.ht: the final states of the rank's sequences.
void chain_forward(const CpContext& cp, const ChunkAttnInputs& in, const ChunkAttnOutputs& out, const ChunkPlan& p,
                   const ExecContext& ctx) {
  void* s = ctx.stream;
  const Device dev = in.q.device;
  const bool ran = p.L.rows > 0;
  exchange_pre(in, p, false, s);
  if (ran && !p.aug) {  // rank 0: no head, the whole forward at once
    chunk_attn_fwd(p.vin, ChunkAttnOutputs{out.o, TensorView::contiguous(p.ht, DType::kF32, p.state_shape(), dev)},
                   p.vopt, inner_ctx(ctx, p));
    dev::chain_tail_record(p.L, p.sd, p.ht, false, p.rec, s);
  }
  const int64_t A = p.A(), HV = p.sd.HV, K = p.sd.K, V = p.sd.V;
  const DType io = in.v.dtype;
  if (ran && p.aug) {
    dev::chain_aug_inputs(p.L, p.sd, in.v.data, io, in.v.strides[1], in.v.strides[2], p.v_aug, p.h0, p.h0_aug, s);
    chunk_attn_fwd(p.ain,
                   ChunkAttnOutputs{TensorView::contiguous(p.o_aug, io, {1, p.L.rows, HV, A}, dev),
                                    TensorView::contiguous(p.ht_aug, DType::kF32, {p.N, HV, K, A}, dev)},
                   p.aopt, inner_ctx(ctx, p));
    dev::chain_tail_record(p.L, p.sd, p.ht_aug, true, p.rec, s);
  }
  cp.comm->all_gather(p.rec, p.all, sizeof(float) * p.sd.rec(), s);
  if (!ran || !p.aug) return;
  dev::chunk_head_state(p.L, p.sd, p.all, p.sd.rec(), p.h0, true, p.Sinit, s);
  // o += Qt S_init: cuBLAS unless capturing on a stream that has no cuBLAS context yet.
  const int device = dev.index;
  const bool blas = !capturing(s) || cuda::dense_prepared(device, s);
  if (blas) {
    dev::to_dtype(p.Sinit, p.Sb, io, HV * K * V, s);
    const size_t es = dtype_size(io);
    for (int64_t j = 0; j < HV; ++j) {
      cuda::GemmArgs g;
      g.M = p.L.rows;
      g.N = V;
      g.K = K;
      g.beta = 1.0f;
      g.a = static_cast<const char*>(p.o_aug) + static_cast<size_t>(j * A + V) * es;
      g.lda = HV * A;
      g.b = static_cast<const char*>(p.Sb) + static_cast<size_t>(j * K * V) * es;
      g.ldb = V;
      g.c = static_cast<char*>(p.o_aug) + static_cast<size_t>(j * A) * es;
      g.ldc = HV * A;
      g.ab_dtype = g.c_dtype = io;
      cuda::gemm(device, s, g);
    }
  }
  dev::chain_aug_output(p.L, p.sd, p.o_aug, io, out.o.data, out.o.dtype, out.o.strides[1], out.o.strides[2], p.Sinit,
                        !blas, s);
  dev::chain_aug_states(p.L, p.sd, p.ht_aug, p.Sinit, p.ht, s);
}

}  // namespace

bool cp_cuda_tier3_state_pass() {
#if LINATTN_CP_CUDA_SEG
  return true;
#else
  return false;
#endif
}

size_t cp_chunk_attn_workspace_bytes_cuda(const CpContext& cp, const ChunkAttnInputs& in, const ChunkAttnOptions& opt,
                                          bool backward) {
  return plan(cp, in, opt, cudacp::kCountingBase, backward).total;
}

void cp_chunk_attn_fwd_cuda(const CpContext& cp, const ChunkAttnInputs& in, const ChunkAttnOutputs& out,
                            const ChunkAttnOptions& opt, const ExecContext& ctx) {
  cudacp::DeviceScope scope(in.q.device.index);
  cudacp::Scratch ws(ctx, plan(cp, in, opt, cudacp::kCountingBase, false).total, opt.use_graph, "chunk_attn");
  const ChunkPlan p = plan(cp, in, opt, ws.base(), false);
  void* s = ctx.stream;
  const bool ran = p.L.rows > 0;
  if (p.chain) {
    chain_forward(cp, in, out, p, ctx);
  } else {
    forward_exchange(cp, in, p, s);
    if (ran)
      chunk_attn_fwd(p.vin,
                     ChunkAttnOutputs{out.o, TensorView::contiguous(p.ht, DType::kF32, p.state_shape(), in.q.device)},
                     p.vopt, inner_ctx(ctx, p));
  }
  if (opt.output_final_state)  // an empty rank owns only empty sequences: final state = h0
    dev::copy_states(p.L, dev::Pick::kEndsHere, false, ran ? p.ht : p.h0, DType::kF32, out.final_state.data,
                     out.final_state.dtype, p.sd.state(), s);
}

void cp_chunk_attn_bwd_cuda(const CpContext& cp, const ChunkAttnInputs& in, const TensorView& d_o,
                            const TensorView& d_final_state, const ChunkAttnGrads& grads, const ChunkAttnOptions& opt,
                            const ExecContext& ctx) {
  cudacp::DeviceScope scope(in.q.device.index);
  cudacp::Scratch ws(ctx, plan(cp, in, opt, cudacp::kCountingBase, true).total, opt.use_graph, "chunk_attn");
  const ChunkPlan p = plan(cp, in, opt, ws.base(), true);
  void* s = ctx.stream;
  const Device dev = in.q.device;
  const int64_t SK = p.sd.state(), NS = p.N * SK, REC = p.sd.rec();
  if (p.chain) exchange_pre(in, p, true, s);  // the chained backward exchanges once, below
  else forward_exchange(cp, in, p, s);
  const bool with_dht = opt.output_final_state && d_final_state.defined();
  dev::copy_states(p.L, dev::Pick::kEndsHere, true, with_dht ? d_final_state.data : nullptr, d_final_state.dtype,
                   p.dht, DType::kF32, SK, s);
  ChunkAttnGrads vg = grads;
  vg.dinitial_state = TensorView::contiguous(p.dh0, DType::kF32, p.state_shape(), dev);
  if (grads.dA_log.defined()) vg.dA_log = TensorView::contiguous(p.prm, DType::kF32, {p.nA}, dev);
  if (grads.ddt_bias.defined()) {
    vg.ddt_bias = grads.ddt_bias;
    vg.ddt_bias.data = p.prm + p.nA;
    vg.ddt_bias.dtype = DType::kF32;
  }
  const TensorView dht = TensorView::contiguous(p.dht, DType::kF32, p.state_shape(), dev);
  // Ranks that may hold a head record its state gradient: the dS stage when built in (then every
  // rank runs one full backward after the exchange), else a full backward (phase A).
  const bool ran = p.L.rows > 0, phase_a = p.L.rank > 0;
  const bool phase_b = p.dstate || p.L.rank < p.world - 1 || !phase_a;
  if (phase_a && ran) {
#if LINATTN_CP_CUDA_DSTATE
    const cuda::GdnBwdParams b = dstate_params(p, d_o);
    cuda::gdn_bwd(b, dstate_plan(p, b.f), nullptr, nullptr, p.inner, p.inner_bytes, s, cuda::GdnBwdStage::kDState);
#else
    chunk_attn_bwd(p.vin, d_o, dht, vg, p.vopt, inner_ctx(ctx, p));
#endif
  }
  if (phase_a) dev::chunk_head_record(p.L, p.sd, p.dh0, p.drec, s);
  if (p.chain) {  // both records in one all-gather ([REC + SK] per rank), then both chains
    cp.comm->all_gather(p.rec, p.all, sizeof(float) * (REC + SK), s);
    if (p.L.rank > 0) dev::chunk_head_state(p.L, p.sd, p.all, REC + SK, p.h0, false, nullptr, s);
    if (p.L.rank < p.world - 1) dev::chunk_tail_grad(p.L, p.sd, p.all, REC + SK, p.dall, REC + SK, p.dht, s);
    if (ran) chunk_attn_bwd(p.vin, d_o, dht, vg, p.vopt, inner_ctx(ctx, p));
  } else {
    cp.comm->all_gather(p.drec, p.dall, sizeof(float) * SK, s);
    if (phase_b) {
      if (p.L.rank < p.world - 1) dev::chunk_tail_grad(p.L, p.sd, p.all, REC, p.dall, SK, p.dht, s);
      if (ran) chunk_attn_bwd(p.vin, d_o, dht, vg, p.vopt, inner_ctx(ctx, p));
    }
  }
  if (!ran) {  // only empty sequences here: dh0 = dht, no parameter gradient
    cudacp::copy_async(p.dh0, p.dht, sizeof(float) * NS, s);
    cudacp::memset_async(p.prm, sizeof(float) * (p.nA + p.nB), s);
  }
  if (grads.dinitial_state.defined())
    dev::copy_states(p.L, dev::Pick::kStartsHere, true, p.dh0, DType::kF32, grads.dinitial_state.data,
                     grads.dinitial_state.dtype, SK, s);
  if (!grads.dA_log.defined() && !grads.ddt_bias.defined()) return;
  const int64_t stride = p.nA + p.nB;
  const float* src = p.prm;
  int parts = 1;
  if (cp.reduce_param_grads) {
    cp.comm->all_gather(p.prm, p.allp, sizeof(float) * stride, s);
    src = p.allp;
    parts = p.world;
  }
  if (grads.dA_log.defined()) dev::sum_ranks(src, parts, stride, p.nA, grads.dA_log.data, grads.dA_log.dtype, s);
  if (grads.ddt_bias.defined())
    dev::sum_ranks(src + p.nA, parts, stride, p.nB, grads.ddt_bias.data, grads.ddt_bias.dtype, s);
}

}  // namespace linattn::parallel
#endif

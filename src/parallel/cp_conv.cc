// Context-parallel short causal conv on the CPU (see cp_ops.h; CUDA tensors: cp_conv_cuda.cc).
// Per rank: the shard's virtual sequences run through the public conv_fwd / conv_bwd with virtual initial states: a sequence
// continuing from earlier ranks starts from the W inputs before this rank's first row (slot s =
// global row R0 - W + s, from whichever ranks hold those rows, or the sequence's own initial
// state slots before its first token). Exchanges (fp32 records, fixed size per rank):
//   forward: [rows, then x rows R1 - W .. R1 - 1 as [W, D]] (rows before R0 of the rank unused);
//   backward: [head sequence or -1, then the head's initial-state gradient [D, W]], scattered by
//   every rank onto the rows it holds (dx) and the initial-state slots of sequences it starts.
// The scatter adds into dx after the local backward (one extra rounding in dx's dtype).
#include <cstring>
#include <vector>

#include "core/check.h"
#include "cpu/convert.h"
#include "parallel/cp_common.h"
#include "parallel/cp_cuda.h"

namespace linattn::parallel {
namespace {

struct ConvLocal {
  CpShard shard;
  int64_t D = 0, W = 0;
  Tensor cu, h0, ht;
  ConvInputs vin;
  ConvOptions vopt;
  bool active() const { return !shard.seqs.empty(); }
};

float x_at(const TensorView& x, int64_t row, int64_t d) {
  return cpu::load_one(x.data, x.dtype, row * x.strides[1] + d * x.strides[2]);
}

ConvLocal prepare(const CpContext& cp, const ConvInputs& in, const ConvOptions& opt, const ExecContext& ctx) {
  LINATTN_CHECK(cp.comm != nullptr, "cp.comm: expected a Communicator, got null");
  LINATTN_CHECK(in.x.defined() && in.weight.defined(), "x, weight: expected tensors, got none");
  ConvLocal l;
  l.shard = open_cp_call(cp, "conv", ": CPU tensors need a host communicator (thread_comm.h)", opt.use_graph,
                         in.cu_seqlens, in.x, "x", 3, ", D]");
  l.D = in.x.shape[2];
  l.W = in.weight.shape[1];
  const int64_t D = l.D, W = l.W, R0 = l.shard.row_begin(), rows = l.shard.rows();
  // Forward exchange: the last W rows of x of every rank.
  std::vector<float> rec(static_cast<size_t>(1 + W * D), 0.0f);
  rec[0] = static_cast<float>(rows);
  for (int64_t k = 0; k < W; ++k) {
    const int64_t row = rows - W + k;
    if (row >= 0)
      for (int64_t d = 0; d < D; ++d) rec[1 + k * D + d] = x_at(in.x, row, d);
  }
  const std::vector<float> all = gather_records(cp, rec, ctx);
  const int64_t nv = static_cast<int64_t>(l.shard.seqs.size());
  const DType sdt = in.initial_state.defined() ? in.initial_state.dtype : in.x.dtype;
  l.cu = virtual_cu_tensor(l.shard);
  l.h0 = Tensor(sdt, {nv, D, W});
  l.ht = Tensor(in.x.dtype, {nv, D, W});
  auto h0_slot = [&](int64_t n, int64_t d, int64_t s) {
    return in.initial_state.defined() ? cpu::load_one(in.initial_state.data, in.initial_state.dtype, (n * D + d) * W + s) : 0.0f;
  };
  for (int64_t i = 0; i < nv; ++i) {
    const CpSeq& q = l.shard.seqs[i];
    const int64_t bos = l.shard.seq_bos[q.n];
    for (int64_t s = 0; s < W; ++s) {
      const int64_t p = R0 - W + s;  // global row of slot s (head only)
      int r = 0;
      for (int rr = 0; rr < l.shard.world; ++rr)
        if (l.shard.rank_begin[rr] <= p && p < l.shard.rank_begin[rr + 1]) r = rr;
      for (int64_t d = 0; d < D; ++d) {
        float v;
        if (q.starts_here) v = h0_slot(q.n, d, s);
        else if (p < bos) v = h0_slot(q.n, d, W + p - bos);
        else v = all[r * rec.size() + 1 + (p - (l.shard.rank_begin[r + 1] - W)) * D + d];
        l.h0.set((i * D + d) * W + s, v);
      }
    }
  }
  l.vin = in;
  l.vin.cu_seqlens = l.cu;
  l.vin.initial_state = l.h0;
  l.vopt = opt;
  l.vopt.max_num_seqs = 0;
  return l;
}

Tensor like_f32(const TensorView& t) { return Tensor(DType::kF32, std::vector<int64_t>(t.shape.begin(), t.shape.begin() + t.ndim)); }

bool on_cuda(const TensorView& t) { return t.defined() && t.device.type == DeviceType::kCUDA; }

}  // namespace

size_t cp_conv_workspace_bytes(const CpContext& cp, const ConvInputs& in, const ConvOptions& opt) {
  return on_cuda(in.x) ? cp_conv_workspace_bytes_cuda(cp, in, opt) : 0;
}

void cp_conv_fwd(const CpContext& cp, const ConvInputs& in, const ConvOutputs& out, const ConvOptions& opt,
                 const ExecContext& ctx) {
  if (on_cuda(in.x)) return cp_conv_fwd_cuda(cp, in, out, opt, ctx);
  ConvLocal l = prepare(cp, in, opt, ctx);
  if (!l.active()) return;
  conv_fwd(l.vin, ConvOutputs{out.y, opt.output_final_state ? TensorView(l.ht) : TensorView{}}, l.vopt, ctx);
  if (!opt.output_final_state) return;
  const int64_t DW = l.D * l.W;
  for (size_t i = 0; i < l.shard.seqs.size(); ++i)
    if (l.shard.seqs[i].ends_here)
      for (int64_t e = 0; e < DW; ++e) {
        const float v = static_cast<float>(l.ht.get(static_cast<int64_t>(i) * DW + e));
        cpu::store_row(&v, 1, out.final_state.dtype, out.final_state.data, l.shard.seqs[i].n * DW + e);
      }
}

void cp_conv_bwd(const CpContext& cp, const ConvInputs& in, const TensorView& dy, const TensorView& d_final_state,
                 const ConvGrads& grads, const ConvOptions& opt, const ExecContext& ctx) {
  if (on_cuda(in.x)) return cp_conv_bwd_cuda(cp, in, dy, d_final_state, grads, opt, ctx);
  ConvLocal l = prepare(cp, in, opt, ctx);
  const int64_t D = l.D, W = l.W, DW = D * W, nv = static_cast<int64_t>(l.shard.seqs.size());
  Tensor dht(DType::kF32, {nv, D, W}), dh0(DType::kF32, {nv, D, W});
  if (opt.output_final_state && d_final_state.defined())
    for (int64_t i = 0; i < nv; ++i)
      if (l.shard.seqs[i].ends_here)
        for (int64_t e = 0; e < DW; ++e)
          dht.set(i * DW + e, cpu::load_one(d_final_state.data, d_final_state.dtype, l.shard.seqs[i].n * DW + e));
  ConvGrads vg = grads;
  vg.dinitial_state = dh0;
  Tensor dw, db;
  if (grads.dweight.defined()) vg.dweight = dw = like_f32(grads.dweight);
  if (grads.dbias.defined()) vg.dbias = db = like_f32(grads.dbias);
  if (l.active()) conv_bwd(l.vin, dy, opt.output_final_state ? TensorView(dht) : TensorView{}, vg, l.vopt, ctx);
  // Backward exchange: each head's initial-state gradient goes back to its rows / h0 slots.
  std::vector<float> rec(static_cast<size_t>(1 + DW), 0.0f);
  rec[0] = l.shard.has_head() ? static_cast<float>(l.shard.seqs.front().n) : -1.0f;
  if (l.shard.has_head())
    for (int64_t e = 0; e < DW; ++e) rec[1 + e] = static_cast<float>(dh0.get(e));
  const std::vector<float> all = gather_records(cp, rec, ctx);
  const int64_t R0 = l.shard.row_begin(), R1 = R0 + l.shard.rows();
  std::vector<float> own(static_cast<size_t>(l.shard.num_seqs() * DW), 0.0f);  // dh0 of sequences starting here
  for (int64_t i = 0; i < nv; ++i)
    if (l.shard.seqs[i].starts_here)
      for (int64_t e = 0; e < DW; ++e) own[l.shard.seqs[i].n * DW + e] = static_cast<float>(dh0.get(i * DW + e));
  for (int r = 0; r < l.shard.world; ++r) {
    const float* x = all.data() + r * rec.size();
    if (x[0] < 0.0f || r == l.shard.rank) continue;
    const int64_t m = static_cast<int64_t>(x[0]), bos = l.shard.seq_bos[m], start = l.shard.rank_begin[r];
    const bool owner = bos >= R0 && bos < R1;
    for (int64_t s = 0; s < W; ++s) {
      const int64_t p = start - W + s;
      for (int64_t d = 0; d < D; ++d) {
        const float g = x[1 + d * W + s];
        if (p >= bos && p >= R0 && p < R1 && grads.dx.defined()) {
          const int64_t off = (p - R0) * grads.dx.strides[1] + d * grads.dx.strides[2];
          const float v = cpu::load_one(grads.dx.data, grads.dx.dtype, off) + g;
          cpu::store_row(&v, 1, grads.dx.dtype, grads.dx.data, off);
        } else if (p < bos && owner) {
          own[(m * D + d) * W + W + p - bos] += g;
        }
      }
    }
  }
  if (grads.dinitial_state.defined())
    for (int64_t e = 0; e < l.shard.num_seqs() * DW; ++e)
      cpu::store_row(&own[e], 1, grads.dinitial_state.dtype, grads.dinitial_state.data, e);
  if (dw.defined()) {
    if (!l.active()) std::memset(dw.data<float>(), 0, sizeof(float) * dw.numel());
    reduce_param_grad(cp, dw, grads.dweight, ctx);
  }
  if (db.defined()) {
    if (!l.active()) std::memset(db.data<float>(), 0, sizeof(float) * db.numel());
    reduce_param_grad(cp, db, grads.dbias, ctx);
  }
}

}  // namespace linattn::parallel

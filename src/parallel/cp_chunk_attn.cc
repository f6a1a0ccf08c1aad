// Context-parallel GDN / KDA on the CPU (see cp_ops.h; CUDA tensors: cp_chunk_cuda.cc). Per rank:
// the shard's virtual sequences run through the public chunk_attn_fwd / bwd (so tiers 1-3 and every
// option apply) with initial states (and, backward, final-state gradients) that come from the
// exchange. Records: cp_chunk_cpu.h. Two exchanges (env LINATTN_CP_CHAIN, default 0, as on CUDA: cp_chunk_cuda.cc says why):
//  - chained (cp_chunk_chain.cc, LINATTN_CP_CHAIN=1): only ranks a sequence crosses whole compute a
//    transition; see there.
//  - first version (here, the default): every rank with a tail computes its (M, S_loc)
//    before the forward exchange; the backward runs that exchange, then a second one of each head's
//    (M, dS_loc) computed on the head's rank.
// Sequence ids travel as floats: exact below 2^24 sequences.
#include <cstring>
#include <vector>

#include "api/chunk_params_build.h"
#include "core/check.h"
#include "core/thread_pool.h"
#include "core/env.h"
#include "core/util.h"
#include "cpu/convert.h"
#include "cpu/seg_pass.h"
#include "meta/chunk_attn_desc.h"
#include "parallel/cp_chunk_cpu.h"
#include "parallel/cp_cuda.h"
#include "plan/chunk_plan.h"

namespace linattn::parallel {
namespace cpucp {

void read_state(const Dims& m, const TensorView& t, int64_t n, float* dst) {
  for (int64_t j = 0; j < m.HV; ++j)
    for (int64_t d = 0; d < m.K; ++d)
      for (int64_t c = 0; c < m.V; ++c)
        dst[(j * m.K + d) * m.V + c] = t.defined() ? cpu::load_one(t.data, t.dtype, m.at(n, j, d, c)) : 0.0f;
}

void write_state(const Dims& m, const float* src, const TensorView& t, int64_t n) {
  for (int64_t j = 0; j < m.HV; ++j)
    for (int64_t d = 0; d < m.K; ++d)
      for (int64_t c = 0; c < m.V; ++c) cpu::store_row(src + (j * m.K + d) * m.V + c, 1, t.dtype, t.data, m.at(n, j, d, c));
}

namespace {
int threads_of(const ExecContext& ctx) {
  const int pool = ThreadPool::global().num_threads();
  return ctx.num_threads > 0 ? std::min(ctx.num_threads, pool) : pool;
}
}  // namespace

Local prepare(const CpContext& cp, const ChunkAttnInputs& in, const ChunkAttnOptions& opt, const ExecContext& ctx) {
  LINATTN_CHECK(cp.comm != nullptr, "cp.comm: expected a Communicator, got null");
  LINATTN_CHECK(in.q.defined() && in.v.defined(), "q, v: expected tensors, got none");
  Local l;
  l.shard = open_cp_call(cp, "chunk_attn",
                         ": CPU tensors need a host communicator (thread_comm.h)",
                         opt.use_graph, in.cu_seqlens, in.q, "q", 4, ", H, K]");
  l.m = Dims{in.v.shape[2], in.q.shape[3], in.v.shape[3], opt.state_v_first};
  const int64_t nv = static_cast<int64_t>(l.shard.seqs.size());
  l.cu = virtual_cu_tensor(l.shard);
  l.h0 = Tensor(DType::kF32, l.m.state_shape(nv));
  l.ht = Tensor(DType::kF32, l.m.state_shape(nv));
  std::vector<float> buf(static_cast<size_t>(l.m.HV * l.m.kv()));
  for (int64_t i = 0; i < nv; ++i) {
    read_state(l.m, l.shard.seqs[i].starts_here ? in.initial_state : TensorView{}, l.shard.seqs[i].n, buf.data());
    write_state(l.m, buf.data(), l.h0, i);
  }
  l.vin = in;
  l.vin.cu_seqlens = l.cu;
  l.vin.initial_state = l.h0;
  l.vin.chunk_indices = l.vin.chunk_offsets = TensorView{};
  l.vopt = opt;
  l.vopt.output_final_state = true;  // the tail's gradient enters as a final-state gradient
  l.vopt.max_num_seqs = 0;
  l.threads = threads_of(ctx);
  if (l.active()) {
    const meta::ChunkAttnDesc d = meta::describe_chunk_attn(l.vin, l.vopt);
    l.p = api::build_chunk_params(d, l.vin, nullptr);
    l.p.BT = plan::plan_chunk_fwd(d, {}, l.threads).BT;
    l.ws.resize(cpu::seg_pass_workspace_bytes(l.p, l.threads));
  }
  return l;
}

void tail_record(Local& l, float* rec) {
  std::fill(rec, rec + l.m.record(), 0.0f);
  rec[0] = l.shard.rows() > 0 ? 1.0f : 0.0f;
  rec[1] = -1.0f;
  if (!l.shard.has_tail()) return;
  const CpSeq& t = l.shard.seqs.back();
  rec[1] = static_cast<float>(t.n);
  rec[2] = t.starts_here ? 1.0f : 0.0f;
  cpu::seg_state_pass(l.p, l.one(t), rec + 4 + l.m.mk(), rec + 4, l.threads, l.ws.data());
}

void chain_head(const Local& l, const ChunkAttnInputs& in, const float* all, int64_t stride, bool absolute_start,
                float* S) {
  const Dims& m = l.m;
  const int64_t n = l.shard.seqs.front().n, MK = m.mk();
  std::vector<int> chain;  // ranks before this one holding earlier parts of sequence n, latest first
  for (int r = l.shard.rank - 1; r >= 0; --r) {
    const float* x = all + r * stride;
    if (x[0] == 0.0f) continue;
    LINATTN_ASSERT(x[1] == static_cast<float>(n), "rank ", r, " tail: expected sequence ", n, ", got ", x[1]);
    chain.push_back(r);
    if (x[2] != 0.0f) break;
  }
  LINATTN_ASSERT(!chain.empty() && all[chain.back() * stride + 2] != 0.0f, "sequence ", n, ": no start rank");
  std::vector<float> next(static_cast<size_t>(m.HV * m.kv()));
  read_state(m, in.initial_state, n, S);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const float* x = all + *it * stride;
    if (absolute_start && it == chain.rbegin()) {
      std::copy(x + 4 + MK, x + 4 + MK + m.HV * m.kv(), S);
      continue;
    }
    for (int64_t j = 0; j < m.HV; ++j)
      cpu::affine_state(m.K, m.V, x + 4 + j * m.K * m.K, false, S + j * m.kv(), x + 4 + MK + j * m.kv(),
                        next.data() + j * m.kv());
    std::copy(next.begin(), next.end(), S);
  }
}

void finish_bwd(const CpContext& cp, Local& l, const ChunkAttnGrads& grads, const ExecContext& ctx,
                const TensorView& d_o, const Tensor& dht) {
  const Dims& m = l.m;
  const int64_t nv = static_cast<int64_t>(l.shard.seqs.size());
  ChunkAttnGrads vg = grads;
  Tensor dA_log, ddt_bias, dh0;
  if (grads.dA_log.defined()) vg.dA_log = dA_log = Tensor(DType::kF32, {grads.dA_log.numel()});
  if (grads.ddt_bias.defined()) {
    std::vector<int64_t> shp(grads.ddt_bias.shape.begin(), grads.ddt_bias.shape.begin() + grads.ddt_bias.ndim);
    vg.ddt_bias = ddt_bias = Tensor(DType::kF32, shp);
  }
  if (grads.dinitial_state.defined()) vg.dinitial_state = dh0 = Tensor(DType::kF32, m.state_shape(nv));
  if (l.active()) {
    chunk_attn_bwd(l.vin, d_o, dht, vg, l.vopt, ctx);
  } else {
    if (dA_log.defined()) std::memset(dA_log.data<float>(), 0, sizeof(float) * dA_log.numel());
    if (ddt_bias.defined()) std::memset(ddt_bias.data<float>(), 0, sizeof(float) * ddt_bias.numel());
  }
  if (dA_log.defined()) reduce_param_grad(cp, dA_log, grads.dA_log, ctx);
  if (ddt_bias.defined()) reduce_param_grad(cp, ddt_bias, grads.ddt_bias, ctx);
  if (grads.dinitial_state.defined()) {
    std::vector<float> zero(static_cast<size_t>(m.HV * m.kv()), 0.0f), buf(zero.size());
    for (int64_t n = 0; n < l.shard.num_seqs(); ++n) write_state(m, zero.data(), grads.dinitial_state, n);
    for (int64_t i = 0; i < nv; ++i) {
      if (!l.shard.seqs[i].starts_here) continue;
      read_state(m, dh0, i, buf.data());
      write_state(m, buf.data(), grads.dinitial_state, l.shard.seqs[i].n);
    }
  }
}

}  // namespace cpucp

namespace {

using namespace cpucp;

// First version's forward exchange: fills the head's initial state in l.h0 (slot 0).
void exchange_states(const CpContext& cp, Local& l, const ChunkAttnInputs& in, const ExecContext& ctx) {
  std::vector<float> rec(static_cast<size_t>(l.m.record()));
  tail_record(l, rec.data());
  const std::vector<float> all = gather_records(cp, rec, ctx);
  if (!l.shard.has_head()) return;
  std::vector<float> S(static_cast<size_t>(l.m.HV * l.m.kv()));
  chain_head(l, in, all.data(), l.m.record(), false, S.data());
  write_state(l.m, S.data(), l.h0, 0);
}

bool on_cuda(const TensorView& t) { return t.defined() && t.device.type == DeviceType::kCUDA; }

bool chained() { return env_flag("LINATTN_CP_CHAIN", false); }

}  // namespace

size_t cp_chunk_attn_workspace_bytes(const CpContext& cp, const ChunkAttnInputs& in, const ChunkAttnOptions& opt,
                                     bool backward) {
  return on_cuda(in.q) ? cp_chunk_attn_workspace_bytes_cuda(cp, in, opt, backward) : 0;
}

void cp_chunk_attn_fwd(const CpContext& cp, const ChunkAttnInputs& in, const ChunkAttnOutputs& out,
                       const ChunkAttnOptions& opt, const ExecContext& ctx) {
  if (on_cuda(in.q)) return cp_chunk_attn_fwd_cuda(cp, in, out, opt, ctx);
  if (chained()) return chain_fwd(cp, in, out, opt, ctx);
  Local l = prepare(cp, in, opt, ctx);
  exchange_states(cp, l, in, ctx);
  if (!l.active()) return;
  chunk_attn_fwd(l.vin, ChunkAttnOutputs{out.o, l.ht}, l.vopt, ctx);
  if (!opt.output_final_state) return;
  std::vector<float> buf(static_cast<size_t>(l.m.HV * l.m.kv()));
  for (size_t i = 0; i < l.shard.seqs.size(); ++i) {
    if (!l.shard.seqs[i].ends_here) continue;
    read_state(l.m, l.ht, static_cast<int64_t>(i), buf.data());
    write_state(l.m, buf.data(), out.final_state, l.shard.seqs[i].n);
  }
}

void cp_chunk_attn_bwd(const CpContext& cp, const ChunkAttnInputs& in, const TensorView& d_o,
                       const TensorView& d_final_state, const ChunkAttnGrads& grads, const ChunkAttnOptions& opt,
                       const ExecContext& ctx) {
  if (on_cuda(in.q)) return cp_chunk_attn_bwd_cuda(cp, in, d_o, d_final_state, grads, opt, ctx);
  if (chained()) return chain_bwd(cp, in, d_o, d_final_state, grads, opt, ctx);
  Local l = prepare(cp, in, opt, ctx);
  exchange_states(cp, l, in, ctx);
  const Dims& m = l.m;
  const int64_t R = m.record(), MK = m.mk();
  // Backward exchange: each head's transition and local state gradient.
  std::vector<float> rec(static_cast<size_t>(R), 0.0f);
  rec[0] = l.shard.rows() > 0 ? 1.0f : 0.0f;
  rec[1] = -1.0f;
  if (l.shard.has_head()) {
    const CpSeq& h = l.shard.seqs.front();
    rec[1] = static_cast<float>(h.n);
    rec[2] = h.ends_here ? 1.0f : 0.0f;
    cpu::seg_state_pass(l.p, l.one(h), nullptr, rec.data() + 4, l.threads, l.ws.data());
    cpu::seg_dstate_pass(l.p, cpu::BwdBuf{d_o.data, d_o.dtype}, l.one(h), rec.data() + 4 + MK, l.threads, l.ws.data());
  }
  const std::vector<float> all = gather_records(cp, rec, ctx);
  const int64_t nv = static_cast<int64_t>(l.shard.seqs.size());
  Tensor dht(DType::kF32, m.state_shape(nv));
  std::vector<float> dS(static_cast<size_t>(m.HV * m.kv())), next(dS.size());
  for (int64_t i = 0; i < nv; ++i) {
    const CpSeq& s = l.shard.seqs[i];
    const TensorView none{};
    read_state(m, opt.output_final_state ? d_final_state : none, s.n, dS.data());  // ends here: d_ht
    if (!s.ends_here) {  // the tail: the gradient flowing back from the later ranks of sequence s.n
      std::vector<int> chain;
      for (int r = l.shard.rank + 1; r < l.shard.world; ++r) {
        const float* x = all.data() + r * R;
        if (x[0] == 0.0f) continue;
        LINATTN_ASSERT(x[1] == static_cast<float>(s.n), "rank ", r, " head: expected sequence ", s.n, ", got ", x[1]);
        chain.push_back(r);
        if (x[2] != 0.0f) break;
      }
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        const float* x = all.data() + *it * R;
        for (int64_t j = 0; j < m.HV; ++j)
          cpu::affine_state(m.K, m.V, x + 4 + j * m.K * m.K, true, dS.data() + j * m.kv(), x + 4 + MK + j * m.kv(),
                            next.data() + j * m.kv());
        dS.swap(next);
      }
    }
    write_state(m, dS.data(), dht, i);
  }
  finish_bwd(cp, l, grads, ctx, d_o, dht);
}

}  // namespace linattn::parallel

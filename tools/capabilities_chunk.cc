// Capability probe of the chunked GDN / KDA ops (chunk_attn_fwd / chunk_attn_bwd): one tiny
// varlen case (GDN: H = 2, HV = 4 (GVA); KDA: H = HV = 2; K = 64, V = 32, BT = 32) with an
// initial state, the final state written, unit-norm q / k, log-sigmoid gates (weak to strong
// decay) and beta in (0.2, 0.9). q / k / v / o / dq / dk / dv in the cell's dtype; g, beta,
// states and their gradients fp32. Every output and gradient is compared with ref::chunk_attn_*
// on the same (rounded) inputs. Static buffers (fixed, graph) hold kProbeTMax rows and
// kProbeNMax sequences with garbage in the padding rows and zero-length tail sequences.
#include <cmath>
#include <cstring>
#include <functional>
#include <tuple>

#include "capabilities_util.h"
#include "linattn/graph.h"
#include "ref/chunk_attn_ref.h"

namespace linattn::caps {
namespace {

struct Dims {
  int64_t H, HV, K = 64, V = 32;
  int BT = 32;
  bool kda;
};

// Host tensors of one call: inputs (with padding garbage) and the output-gradient seeds.
struct ChunkHost {
  Tensor q, k, v, g, beta, h0, cu, d_o, d_ht;
  int64_t T_real = 0;
};

ChunkHost make_host(Rng& rng, const Dims& d, const std::vector<int64_t>& lens, int64_t rows, int64_t nseq, DType dt) {
  ChunkHost h;
  h.T_real = total(lens);
  h.q = rand_tensor(rng, dt, {1, rows, d.H, d.K}, -1, 1);
  h.k = rand_tensor(rng, dt, {1, rows, d.H, d.K}, -1, 1);
  l2norm_rows(h.q, d.K);
  l2norm_rows(h.k, d.K);
  garbage_tail(rng, h.q, h.T_real * d.H * d.K);
  garbage_tail(rng, h.k, h.T_real * d.H * d.K);
  h.v = rand_tensor(rng, dt, {1, rows, d.HV, d.V}, -1, 1);
  const std::vector<int64_t> gshape = d.kda ? std::vector<int64_t>{1, rows, d.HV, d.K} : std::vector<int64_t>{1, rows, d.HV};
  h.g = Tensor(DType::kF32, gshape);
  for (int64_t i = 0; i < h.g.numel(); ++i) h.g.set(i, -std::log1p(std::exp(-uniform(rng, -2.0, 5.0))));
  h.beta = rand_tensor(rng, DType::kF32, {1, rows, d.HV}, 0.2, 0.9);
  garbage_tail(rng, h.v, h.T_real * d.HV * d.V);
  garbage_tail(rng, h.g, h.T_real * (h.g.numel() / rows), -9, -1);
  garbage_tail(rng, h.beta, h.T_real * d.HV, 1, 3);
  h.h0 = rand_tensor(rng, DType::kF32, {nseq, d.HV, d.K, d.V}, -0.5, 0.5);
  h.cu = cu_tensor(lens, nseq, DType::kI32);
  h.d_o = rand_tensor(rng, dt, {1, rows, d.HV, d.V}, -1, 1);
  h.d_ht = rand_tensor(rng, DType::kF32, {nseq, d.HV, d.K, d.V}, -0.3, 0.3);
  return h;
}

ChunkAttnInputs inputs_of(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
                          const TensorView& beta, const TensorView& h0, const TensorView& cu) {
  ChunkAttnInputs in;
  in.q = q;
  in.k = k;
  in.v = v;
  in.g = g;
  in.beta = beta;
  in.initial_state = h0;
  in.cu_seqlens = cu;
  return in;
}

// The outputs / gradients of one call, as host tensors.
struct ChunkResult {
  Tensor o, ht, dq, dk, dv, dg, dbeta, dh0;
};

ChunkResult run_ref(const ChunkHost& h, const ChunkAttnOptions& opt, bool bwd) {
  ChunkAttnOptions ropt = opt;
  ropt.use_graph = false;
  ropt.max_num_seqs = 0;
  const Tensor q = h.q.to(DType::kF64), k = h.k.to(DType::kF64), v = h.v.to(DType::kF64);
  const ChunkAttnInputs in = inputs_of(q, k, v, h.g, h.beta, h.h0, h.cu);
  ChunkResult r;
  r.o = Tensor(DType::kF64, h.v.shape());
  r.ht = Tensor(DType::kF64, h.h0.shape());
  ref::chunk_attn_fwd(in, {r.o.view(), r.ht.view()}, ropt);
  if (bwd) {
    r.dq = Tensor(DType::kF64, q.shape());
    r.dk = Tensor(DType::kF64, k.shape());
    r.dv = Tensor(DType::kF64, v.shape());
    r.dg = Tensor(DType::kF64, h.g.shape());
    r.dbeta = Tensor(DType::kF64, h.beta.shape());
    r.dh0 = Tensor(DType::kF64, h.h0.shape());
    ChunkAttnGrads gr;
    gr.dq = r.dq;
    gr.dk = r.dk;
    gr.dv = r.dv;
    gr.dg = r.dg;
    gr.dbeta = r.dbeta;
    gr.dinitial_state = r.dh0;
    ref::chunk_attn_bwd(in, h.d_o.to(DType::kF64), h.d_ht, gr, ropt);
  }
  return r;
}

// Static (or exact-size) tensors of one backend call.
struct ChunkSlots {
  Slot q, k, v, g, beta, h0, cu, d_o, d_ht, o, ht, dq, dk, dv, dg, dbeta, dh0;
  ChunkSlots(Rng& rng, const ChunkHost& h, const Backend& be, bool bwd)
      : q(h.q, be), k(h.k, be), v(h.v, be), g(h.g, be), beta(h.beta, be), h0(h.h0, be), cu(h.cu, be),
        o(rand_tensor(rng, h.v.dtype(), h.v.shape(), -9, 9), be),
        ht(rand_tensor(rng, DType::kF32, h.h0.shape(), -9, 9), be) {
    if (!bwd) return;
    d_o = Slot(h.d_o, be);
    d_ht = Slot(h.d_ht, be);
    dq = Slot(rand_tensor(rng, h.q.dtype(), h.q.shape(), -9, 9), be);
    dk = Slot(rand_tensor(rng, h.k.dtype(), h.k.shape(), -9, 9), be);
    dv = Slot(rand_tensor(rng, h.v.dtype(), h.v.shape(), -9, 9), be);
    dg = Slot(rand_tensor(rng, DType::kF32, h.g.shape(), -9, 9), be);
    dbeta = Slot(rand_tensor(rng, DType::kF32, h.beta.shape(), -9, 9), be);
    dh0 = Slot(rand_tensor(rng, DType::kF32, h.h0.shape(), -9, 9), be);
  }
  ChunkAttnInputs in() const { return inputs_of(q, k, v, g, beta, h0, cu); }
  ChunkAttnGrads grads() const {
    ChunkAttnGrads r;
    r.dq = dq;
    r.dk = dk;
    r.dv = dv;
    r.dg = dg;
    r.dbeta = dbeta;
    r.dinitial_state = dh0;
    return r;
  }
  void upload(const ChunkHost& h, bool bwd) {
    q.upload(h.q);
    k.upload(h.k);
    v.upload(h.v);
    g.upload(h.g);
    beta.upload(h.beta);
    h0.upload(h.h0);
    cu.upload(h.cu);
    if (bwd) {
      d_o.upload(h.d_o);
      d_ht.upload(h.d_ht);
    }
  }
  ChunkResult download(bool bwd) const {
    ChunkResult r;
    r.o = o.download();
    r.ht = ht.download();
    if (bwd) {
      r.dq = dq.download();
      r.dk = dk.download();
      r.dv = dv.download();
      r.dg = dg.download();
      r.dbeta = dbeta.download();
      r.dh0 = dh0.download();
    }
    return r;
  }
};

void compare(Checker& chk, const ChunkResult& ref, const ChunkResult& got, const ChunkHost& h, const Dims& d, DType dt,
             bool bwd, const std::string& tag) {
  using test::Qty;
  using test::tolerance;
  const int64_t T = h.T_real;
  chk.add(tag + "o", ref.o, got.o, tolerance(dt, Qty::kO), T * d.HV * d.V);
  chk.add(tag + "final_state", ref.ht, got.ht, tolerance(dt, Qty::kFinalState));
  if (!bwd) return;
  chk.add(tag + "dq", ref.dq, got.dq, tolerance(dt, Qty::kDq), T * d.H * d.K);
  chk.add(tag + "dk", ref.dk, got.dk, tolerance(dt, Qty::kDk), T * d.H * d.K);
  chk.add(tag + "dv", ref.dv, got.dv, tolerance(dt, Qty::kDv), T * d.HV * d.V);
  chk.add(tag + "dg", ref.dg, got.dg, tolerance(dt, Qty::kDg), T * d.HV * (d.kda ? d.K : 1));
  chk.add(tag + "dbeta", ref.dbeta, got.dbeta, tolerance(dt, Qty::kDbeta), T * d.HV);
  chk.add(tag + "dh0", ref.dh0, got.dh0, tolerance(dt, Qty::kDh0));
}

void bitwise(Checker& chk, const ChunkResult& a, const ChunkResult& b, bool bwd) {
  chk.add_bitwise("o", a.o, b.o);
  chk.add_bitwise("final_state", a.ht, b.ht);
  if (!bwd) return;
  for (auto [n, x, y] : {std::tuple{"dq", &a.dq, &b.dq}, {"dk", &a.dk, &b.dk}, {"dv", &a.dv, &b.dv},
                         {"dg", &a.dg, &b.dg}, {"dbeta", &a.dbeta, &b.dbeta}, {"dh0", &a.dh0, &b.dh0}})
    chk.add_bitwise(n, *x, *y);
}

}  // namespace

void probe_chunk(const CellKey& key, int variant, Checker& chk) {
  Backend be(key.backend);
  Dims d;
  d.kda = key.op == "kda";
  d.H = 2;
  d.HV = d.kda ? 2 : 4;
  const DType dt = dtype_from_name(key.dtype);
  const bool bwd = key.pass == "fwdbwd", fixed = key.mode != "eager", graph = key.mode == "graph";
  Rng rng(1000 + 17 * variant + (d.kda ? 7 : 0));
  const std::vector<int64_t> lens0 = layout(variant, 0);
  const int64_t rows = fixed ? kProbeTMax : total(lens0);
  const int64_t nseq = fixed ? kProbeNMax : static_cast<int64_t>(lens0.size());
  ChunkAttnOptions opt;
  opt.op = d.kda ? ChunkOp::kKda : ChunkOp::kGdn;
  opt.chunk_size = d.BT;
  opt.output_final_state = true;
  opt.use_graph = fixed;
  opt.max_num_seqs = fixed ? nseq : 0;

  const ChunkHost h0 = make_host(rng, d, lens0, rows, nseq, dt);
  ChunkSlots s(rng, h0, be, bwd);
  // Workspaces only where the contract requires them (fixed capacity); eager calls use their own.
  Workspace fws(be, fixed ? chunk_attn_fwd_workspace_bytes(s.in(), opt, be.ctx()) : 0);
  Workspace bws(be, fixed && bwd ? chunk_attn_bwd_workspace_bytes(s.in(), opt, be.ctx()) : 0);
  const ExecContext fctx = fws.ctx(be), bctx = bws.ctx(be);
  const std::function<void()> step = [&] {
    chunk_attn_fwd(s.in(), {s.o, s.ht}, opt, fctx);
    if (bwd) chunk_attn_bwd(s.in(), s.d_o, s.d_ht, s.grads(), opt, bctx);
  };
  ChunkHost cur = h0;
  run_probe_flow<ChunkResult>(
      be, graph, step,
      [&](int i) {
        cur = make_host(rng, d, layout(variant, i), rows, nseq, dt);
        s.upload(cur, bwd);
      },
      [&] { return s.download(bwd); },
      [&](int i, const ChunkResult& got) { compare(chk, run_ref(cur, opt, bwd), got, cur, d, dt, bwd, replay_tag(i)); },
      [&](const ChunkResult& a, const ChunkResult& b) { bitwise(chk, a, b, bwd); });
}

}  // namespace linattn::caps

// Capability probe of the short causal conv (conv_fwd / conv_bwd): x [1, T, D = 40] in the cell's
// dtype (D not a multiple of the 16-channel vectors), W = 4, fp32 weight / bias / initial state,
// SiLU, final state written; backward: dx, dweight, dbias, dinitial_state for dy and a
// d_final_state. Compared with ref::conv_ref_* on the same rounded inputs; static buffers
// (fixed, graph) as the chunk probe (capabilities_chunk.cc).
#include <functional>
#include <tuple>

#include "capabilities_util.h"
#include "linattn/graph.h"
#include "ref/conv_ref.h"

namespace linattn::caps {
namespace {

constexpr int64_t kD = 40, kW = 4;

struct ConvHost {
  Tensor x, weight, bias, h0, cu, dy, d_ht;
  int64_t T_real = 0;
  ConvInputs in() const {
    ConvInputs r;
    r.x = x;
    r.weight = weight;
    r.bias = bias;
    r.initial_state = h0;
    r.cu_seqlens = cu;
    return r;
  }
};

ConvHost make_host(Rng& rng, const std::vector<int64_t>& lens, int64_t rows, int64_t nseq, DType dt) {
  ConvHost h;
  h.T_real = total(lens);
  h.x = rand_tensor(rng, dt, {1, rows, kD}, -1, 1);
  garbage_tail(rng, h.x, h.T_real * kD);
  h.weight = rand_tensor(rng, DType::kF32, {kD, kW}, -0.6, 0.6);
  h.bias = rand_tensor(rng, DType::kF32, {kD}, -0.3, 0.3);
  h.h0 = rand_tensor(rng, DType::kF32, {nseq, kD, kW}, -1, 1);
  h.cu = cu_tensor(lens, nseq, DType::kI32);
  h.dy = rand_tensor(rng, dt, {1, rows, kD}, -1, 1);
  garbage_tail(rng, h.dy, h.T_real * kD);
  h.d_ht = rand_tensor(rng, DType::kF32, {nseq, kD, kW}, -0.5, 0.5);
  return h;
}

struct ConvResult {
  Tensor y, ht, dx, dw, db, dh0;
};

ConvResult run_ref(const ConvHost& h, const ConvOptions& opt, bool bwd) {
  ConvOptions ropt = opt;
  ropt.use_graph = false;
  ropt.max_num_seqs = 0;
  ref::ConvRefFwd f = ref::conv_ref_fwd(h.in(), ropt);
  ConvResult r;
  r.y = f.y;
  r.ht = f.final_state;
  if (bwd) {
    ref::ConvRefGrads g = ref::conv_ref_bwd(h.in(), h.dy, h.d_ht, ropt);
    r.dx = g.dx;
    r.dw = g.dweight;
    r.db = g.dbias;
    r.dh0 = g.dinitial_state;
  }
  return r;
}

struct ConvSlots {
  Slot x, weight, bias, h0, cu, dy, d_ht, y, ht, dx, dw, db, dh0;
  ConvSlots(Rng& rng, const ConvHost& h, const Backend& be, bool bwd)
      : x(h.x, be), weight(h.weight, be), bias(h.bias, be), h0(h.h0, be), cu(h.cu, be),
        y(rand_tensor(rng, h.x.dtype(), h.x.shape(), -9, 9), be),
        ht(rand_tensor(rng, h.x.dtype(), h.h0.shape(), -9, 9), be) {
    if (!bwd) return;
    dy = Slot(h.dy, be);
    d_ht = Slot(h.d_ht, be);
    dx = Slot(rand_tensor(rng, h.x.dtype(), h.x.shape(), -9, 9), be);
    dw = Slot(rand_tensor(rng, DType::kF32, h.weight.shape(), -9, 9), be);
    db = Slot(rand_tensor(rng, DType::kF32, h.bias.shape(), -9, 9), be);
    dh0 = Slot(rand_tensor(rng, DType::kF32, h.h0.shape(), -9, 9), be);
  }
  ConvInputs in() const {
    ConvInputs r;
    r.x = x;
    r.weight = weight;
    r.bias = bias;
    r.initial_state = h0;
    r.cu_seqlens = cu;
    return r;
  }
  ConvGrads grads() const {
    ConvGrads g;
    g.dx = dx;
    g.dweight = dw;
    g.dbias = db;
    g.dinitial_state = dh0;
    return g;
  }
  void upload(const ConvHost& h, bool bwd) {
    x.upload(h.x);
    weight.upload(h.weight);
    bias.upload(h.bias);
    h0.upload(h.h0);
    cu.upload(h.cu);
    if (bwd) {
      dy.upload(h.dy);
      d_ht.upload(h.d_ht);
    }
  }
  ConvResult download(bool bwd) const {
    ConvResult r;
    r.y = y.download();
    r.ht = ht.download();
    if (bwd) {
      r.dx = dx.download();
      r.dw = dw.download();
      r.db = db.download();
      r.dh0 = dh0.download();
    }
    return r;
  }
};

void compare(Checker& chk, const ConvResult& ref, const ConvResult& got, int64_t T, DType dt, bool bwd,
             const std::string& tag) {
  using test::Qty;
  using test::tolerance;
  chk.add(tag + "y", ref.y, got.y, tolerance(dt, Qty::kConvY), T * kD);
  chk.add(tag + "final_state", ref.ht, got.ht, tolerance(dt, Qty::kConvFinalState));
  if (!bwd) return;
  chk.add(tag + "dx", ref.dx, got.dx, tolerance(dt, Qty::kConvDx), T * kD);
  chk.add(tag + "dweight", ref.dw, got.dw, tolerance(dt, Qty::kConvDw));
  chk.add(tag + "dbias", ref.db, got.db, tolerance(dt, Qty::kConvDb));
  chk.add(tag + "dh0", ref.dh0, got.dh0, tolerance(dt, Qty::kConvDh0));
}

}  // namespace

void probe_conv(const CellKey& key, int variant, Checker& chk) {
  Backend be(key.backend);
  const DType dt = dtype_from_name(key.dtype);
  const bool bwd = key.pass == "fwdbwd", fixed = key.mode != "eager", graph = key.mode == "graph";
  Rng rng(2000 + 31 * variant);
  const std::vector<int64_t> lens0 = layout(variant, 0);
  const int64_t rows = fixed ? kProbeTMax : total(lens0);
  const int64_t nseq = fixed ? kProbeNMax : static_cast<int64_t>(lens0.size());
  ConvOptions opt;
  opt.activation = Activation::kSilu;
  opt.output_final_state = true;
  opt.use_graph = fixed;
  opt.max_num_seqs = fixed ? nseq : 0;
  const ConvHost h0 = make_host(rng, lens0, rows, nseq, dt);
  ConvSlots s(rng, h0, be, bwd);
  Workspace bws(be, fixed && bwd ? conv_bwd_workspace_bytes(s.in(), opt) : 0);
  const ExecContext fctx = be.ctx(), bctx = bws.ctx(be);
  const std::function<void()> step = [&] {
    conv_fwd(s.in(), {s.y, s.ht}, opt, fctx);
    if (bwd) conv_bwd(s.in(), s.dy, s.d_ht, s.grads(), opt, bctx);
  };
  ConvHost cur = h0;
  run_probe_flow<ConvResult>(
      be, graph, step,
      [&](int i) {
        cur = make_host(rng, layout(variant, i), rows, nseq, dt);
        s.upload(cur, bwd);
      },
      [&] { return s.download(bwd); },
      [&](int i, const ConvResult& got) { compare(chk, run_ref(cur, opt, bwd), got, cur.T_real, dt, bwd, replay_tag(i)); },
      [&](const ConvResult& a, const ConvResult& b) {
        chk.add_bitwise("y", a.y, b.y);
        chk.add_bitwise("final_state", a.ht, b.ht);
        if (bwd)
          for (auto [n, x, y] : {std::tuple{"dx", &a.dx, &b.dx}, {"dweight", &a.dw, &b.dw}, {"dbias", &a.db, &b.db},
                                 {"dh0", &a.dh0, &b.dh0}})
            chk.add_bitwise(n, *x, *y);
      });
}

}  // namespace linattn::caps

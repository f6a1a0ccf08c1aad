// The Workloads of the all-modes bench (bench_modes.h): chunked GDN / KDA (--pass fwd | bwd |
// fwdbwd; inputs as bench_chunk.cc: unit-norm q / k, v ~ U(-1, 1), log-sigmoid gates, beta in
// (0.5, 0.73), final state written), the short conv (--channels D --width W, bias, SiLU) and
// the GDN / KDA layers (--hidden, heads and dims from --hqk --hv --k --v; fwd or fwdbwd).
// Host data is generated once at the bucket's capacity; the exact-size tensors hold its first T
// rows and the static buffers all T_max rows (the rows past T are the padding's garbage).
// Tensors live on the backend (caps::Slot: CUDA memory and a stream of the workload's own, or
// host memory); workspaces are allocated once, outside the timed calls.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench_modes.h"
#include "capabilities_util.h"
#include "cli.h"
#include "core/check.h"
#include "linattn/dense.h"
#include "linattn/layers.h"
#include "linattn/meta.h"
#include "linattn/ops.h"
#include "meta/chunk_attn_desc.h"
#include "meta/cost.h"

namespace linattn::bench {
namespace {

using caps::Slot;

// The first `rows` rows (dim 1) of a [1, R, ...] tensor (a copy) or view (a prefix).
Tensor head_rows(const Tensor& t, int64_t rows) {
  std::vector<int64_t> shape = t.shape();
  const size_t row_bytes = t.view().nbytes() / static_cast<size_t>(shape[1]);
  shape[1] = rows;
  Tensor r(t.dtype(), shape);
  if (rows) std::memcpy(r.view().data, t.view().data, row_bytes * static_cast<size_t>(rows));
  return r;
}
TensorView head_rows(TensorView v, int64_t rows) {
  v.shape[1] = rows;
  return v;
}

// Fast seeded fill: xorshift in [lo, hi), converted to the tensor's dtype.
void fill(Tensor& t, uint64_t seed, double lo, double hi) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    t.set(i, lo + (hi - lo) * static_cast<double>(s >> 11) * 0x1.0p-53);
  }
}
Tensor filled(DType dt, std::vector<int64_t> shape, uint64_t seed, double lo, double hi) {
  Tensor t(dt, std::move(shape));
  fill(t, seed, lo, hi);
  return t;
}

// Common pieces: backend, layout, the cu_seqlens of both sets, comparisons.
class Base : public Workload {
 public:
  Base(const BenchArgs& a, int64_t T_max_, int64_t N_max_) : be(a.backend) {
    T = caps::total(a.lengths);
    N = static_cast<int64_t>(a.lengths.size());
    T_max = T_max_;
    N_max = N_max_;
    BT = a.bt;
    LINATTN_CHECK(T <= T_max && N <= N_max, "--capacity: expected T_max >= ", T, " and N_max >= ", N, ", got ", T_max,
                  ",", N_max);
    cu_live = Slot(caps::cu_tensor(a.lengths, N, DType::kI32), be);
    cu_pad = Slot(caps::cu_tensor(a.lengths, N_max, DType::kI32), be);
    cu_stat = Slot(caps::cu_tensor(a.lengths, N_max, DType::kI32), be);
  }
  void sync() override { be.sync(); }
  void* stream() override { return be.stream(); }
  Device device() override { return be.device(); }

 protected:
  // update(): the static inputs' first T rows <- the live inputs, and cu_seqlens, in one copy_tensors call (on CUDA
  // one kernel launch); LINATTN_BENCH_UPDATE=copies: one copy_tensor per tensor (the update before session 17)
  void update_all(std::initializer_list<std::pair<const Slot*, const Slot*>> rows) {
    static const bool per_tensor = [] {
      const char* e = std::getenv("LINATTN_BENCH_UPDATE");
      return e && std::string(e) == "copies";
    }();
    std::vector<TensorCopy> pairs;
    for (auto [d, s] : rows) pairs.push_back({head_rows(d->view(), T), s->view()});
    pairs.push_back({cu_stat.view(), cu_pad.view()});
    if (!per_tensor) return copy_tensors(pairs.data(), pairs.size(), be.ctx());
    for (const TensorCopy& c : pairs) copy_tensor(c.dst, c.src, be.ctx());
  }
  std::vector<Tensor> heads(std::initializer_list<const Slot*> slots) {
    std::vector<Tensor> r;
    for (const Slot* s : slots) r.push_back(head_rows(s->download(), T));
    return r;
  }
  caps::Backend be;
  Slot cu_live, cu_pad, cu_stat;
};

class ChunkWorkload final : public Base {
 public:
  ChunkWorkload(const BenchArgs& a, int64_t T_max_, int64_t N_max_) : Base(a, T_max_, N_max_) {
    const bool kda = a.op == "kda";
    fwd_ = a.pass != "bwd";
    bwd_ = a.pass != "fwd";
    Tensor q = filled(a.dt, {1, T_max, a.hqk, a.k}, 1, -1, 1), k = filled(a.dt, {1, T_max, a.hqk, a.k}, 2, -1, 1);
    caps::l2norm_rows(q, a.k);
    caps::l2norm_rows(k, a.k);
    Tensor v = filled(a.dt, {1, T_max, a.hv, a.v}, 3, -1, 1);
    Tensor g = filled(DType::kF32, kda ? std::vector<int64_t>{1, T_max, a.hv, a.k} : std::vector<int64_t>{1, T_max, a.hv}, 4, 0, 4);
    for (int64_t i = 0; i < g.numel(); ++i) g.set(i, -std::log1p(std::exp(-g.get(i))));
    Tensor beta = filled(DType::kF32, {1, T_max, a.hv}, 5, 0.5, 0.73);
    Tensor d_o = filled(a.dt, {1, T_max, a.hv, a.v}, 6, -1, 1);
    opt_.op = kda ? ChunkOp::kKda : ChunkOp::kGdn;
    opt_.chunk_size = a.bt;
    opt_.output_final_state = true;
    auto make = [&](Set& s, int64_t rows, int64_t seqs, const Slot& cu) {
      s.q = Slot(head_rows(q, rows), be);
      s.k = Slot(head_rows(k, rows), be);
      s.v = Slot(head_rows(v, rows), be);
      s.g = Slot(head_rows(g, rows), be);
      s.beta = Slot(head_rows(beta, rows), be);
      s.cu = &cu;
      s.o = Slot(Tensor(a.dt, {1, rows, a.hv, a.v}), be);
      s.ht = Slot(Tensor(DType::kF32, {seqs, a.hv, a.k, a.v}), be);
      if (bwd_) {
        s.d_o = Slot(head_rows(d_o, rows), be);
        s.d_ht = Slot(filled(DType::kF32, {seqs, a.hv, a.k, a.v}, 7, -0.1, 0.1), be);
        s.dq = Slot(Tensor(a.dt, {1, rows, a.hqk, a.k}), be);
        s.dk = Slot(Tensor(a.dt, {1, rows, a.hqk, a.k}), be);
        s.dv = Slot(Tensor(a.dt, {1, rows, a.hv, a.v}), be);
        s.dg = Slot(Tensor(DType::kF32, head_rows(g, rows).shape()), be);
        s.dbeta = Slot(Tensor(DType::kF32, {1, rows, a.hv}), be);
      }
      s.opt = opt_;
      s.opt.use_graph = &cu == &cu_stat;
      s.opt.max_num_seqs = s.opt.use_graph ? seqs : 0;
      s.fws = std::make_unique<caps::Workspace>(be, fwd_ ? chunk_attn_fwd_workspace_bytes(s.in(), s.opt, be.ctx()) : 0);
      s.bws = std::make_unique<caps::Workspace>(be, bwd_ ? chunk_attn_bwd_workspace_bytes(s.in(), s.opt, be.ctx()) : 0);
    };
    make(live_, T, N, cu_live);
    make(stat_, T_max, N_max, cu_stat);
    const meta::ChunkAttnDesc desc = meta::describe_chunk_attn(live_.in(), live_.opt);
    if (fwd_) {
      const meta::OpCost c = meta::chunk_fwd_cost(desc, a.lengths);
      flops += c.flops;
      bytes += c.bytes;
    }
    if (bwd_) {
      const meta::OpCost c = meta::chunk_bwd_cost(desc, a.lengths);
      flops += c.flops;
      bytes += c.bytes;
    }
  }
  void eager_live() override { run(live_); }
  void fixed_step() override { run(stat_); }
  void update() override {
    if (bwd_) {
      update_all({{&stat_.q, &live_.q}, {&stat_.k, &live_.k}, {&stat_.v, &live_.v}, {&stat_.g, &live_.g},
                  {&stat_.beta, &live_.beta}, {&stat_.d_o, &live_.d_o}});
    } else {
      update_all({{&stat_.q, &live_.q}, {&stat_.k, &live_.k}, {&stat_.v, &live_.v}, {&stat_.g, &live_.g},
                  {&stat_.beta, &live_.beta}});
    }
  }
  std::vector<Tensor> live_outputs() override { return outputs(live_); }
  std::vector<Tensor> static_outputs() override { return outputs(stat_); }

 private:
  struct Set {
    Slot q, k, v, g, beta, o, ht, d_o, d_ht, dq, dk, dv, dg, dbeta;
    const Slot* cu = nullptr;
    ChunkAttnOptions opt;
    std::unique_ptr<caps::Workspace> fws, bws;
    ChunkAttnInputs in() const {
      ChunkAttnInputs r;
      r.q = q;
      r.k = k;
      r.v = v;
      r.g = g;
      r.beta = beta;
      r.cu_seqlens = *cu;
      return r;
    }
  };
  void run(Set& s) {
    if (fwd_) chunk_attn_fwd(s.in(), {s.o, s.ht}, s.opt, s.fws->ctx(be));
    if (bwd_) {
      ChunkAttnGrads gr;
      gr.dq = s.dq;
      gr.dk = s.dk;
      gr.dv = s.dv;
      gr.dg = s.dg;
      gr.dbeta = s.dbeta;
      chunk_attn_bwd(s.in(), s.d_o, s.d_ht, gr, s.opt, s.bws->ctx(be));
    }
  }
  std::vector<Tensor> outputs(Set& s) {
    if (!bwd_) return heads({&s.o});
    return fwd_ ? heads({&s.o, &s.dq, &s.dk, &s.dv}) : heads({&s.dq, &s.dk, &s.dv});
  }
  bool fwd_ = true, bwd_ = false;
  ChunkAttnOptions opt_;
  Set live_, stat_;
};

class ConvWorkload final : public Base {
 public:
  ConvWorkload(const BenchArgs& a, int64_t T_max_, int64_t N_max_) : Base(a, T_max_, N_max_) {
    fwd_ = a.pass != "bwd";
    bwd_ = a.pass != "fwd";
    const int64_t D = a.channels, W = a.width;
    Tensor x = filled(a.dt, {1, T_max, D}, 11, -1, 1), dy = filled(a.dt, {1, T_max, D}, 12, -1, 1);
    weight_ = Slot(filled(DType::kF32, {D, W}, 13, -0.5, 0.5), be);
    bias_ = Slot(filled(DType::kF32, {D}, 14, -0.2, 0.2), be);
    auto make = [&](Set& s, int64_t rows, const Slot& cu) {
      s.x = Slot(head_rows(x, rows), be);
      s.y = Slot(Tensor(a.dt, {1, rows, D}), be);
      s.cu = &cu;
      s.opt.activation = Activation::kSilu;
      s.opt.use_graph = &cu == &cu_stat;
      s.opt.max_num_seqs = s.opt.use_graph ? N_max : 0;
      s.opt.chunk_size = a.bt;
      if (bwd_) {
        s.dy = Slot(head_rows(dy, rows), be);
        s.dx = Slot(Tensor(a.dt, {1, rows, D}), be);
        s.dw = Slot(Tensor(DType::kF32, {D, W}), be);
        s.db = Slot(Tensor(DType::kF32, {D}), be);
        s.ws = std::make_unique<caps::Workspace>(be, conv_bwd_workspace_bytes(in(s), s.opt));
      }
    };
    make(live_, T, cu_live);
    make(stat_, T_max, cu_stat);
    const double elem = static_cast<double>(dtype_size(a.dt)) * static_cast<double>(T * D);
    bytes = (fwd_ ? 2 * elem : 0) + (bwd_ ? 3 * elem : 0);
    flops = static_cast<double>(T * D) * 2 * static_cast<double>(W) * ((fwd_ ? 1 : 0) + (bwd_ ? 2 : 0));
  }
  void eager_live() override { run(live_); }
  void fixed_step() override { run(stat_); }
  void update() override {
    if (bwd_) {
      update_all({{&stat_.x, &live_.x}, {&stat_.dy, &live_.dy}});
    } else {
      update_all({{&stat_.x, &live_.x}});
    }
  }
  std::vector<Tensor> live_outputs() override { return outputs(live_); }
  std::vector<Tensor> static_outputs() override { return outputs(stat_); }

 private:
  struct Set {
    Slot x, y, dy, dx, dw, db;
    const Slot* cu = nullptr;
    ConvOptions opt;
    std::unique_ptr<caps::Workspace> ws;
  };
  ConvInputs in(const Set& s) const {
    ConvInputs r;
    r.x = s.x;
    r.weight = weight_;
    r.bias = bias_;
    r.cu_seqlens = *s.cu;
    return r;
  }
  void run(Set& s) {
    if (fwd_) conv_fwd(in(s), {s.y, TensorView{}}, s.opt, be.ctx());
    if (bwd_) {
      ConvGrads g;
      g.dx = s.dx;
      g.dweight = s.dw;
      g.dbias = s.db;
      conv_bwd(in(s), s.dy, TensorView{}, g, s.opt, s.ws->ctx(be));
    }
  }
  std::vector<Tensor> outputs(Set& s) {
    if (!bwd_) return heads({&s.y});
    return fwd_ ? heads({&s.y, &s.dx}) : heads({&s.dx});
  }
  bool fwd_ = true, bwd_ = false;
  Slot weight_, bias_;
  Set live_, stat_;
};

class LayerWorkload final : public Base {
 public:
  LayerWorkload(const BenchArgs& a, int64_t T_max_, int64_t N_max_) : Base(a, T_max_, N_max_) {
    LINATTN_CHECK(a.pass != "bwd", "--pass: the layers run fwd or fwdbwd, got bwd");
    bwd_ = a.pass == "fwdbwd";
    LayerConfig c;
    c.kind = a.op == "kda_layer" ? LayerKind::kKda : LayerKind::kGatedDeltaNet;
    c.hidden_size = std::stoll(cli::flag(a.extra, "hidden", "2048"));
    c.num_heads = a.hqk;
    c.num_v_heads = a.hv;
    c.head_k_dim = a.k;
    c.head_v_dim = a.v;
    c.chunk_size = a.bt;
    c.dtype = a.dt;
    layer_ = std::make_unique<LinearAttentionLayer>(c, be.device());
    layer_->init_random(42);
    layer_->reserve(T_max, N_max, be.ctx());  // CUDA: cuBLAS state of the bench stream, before capture
    const int64_t hid = c.hidden_size;
    Tensor x = filled(a.dt, {1, T_max, hid}, 21, -1, 1), dy = filled(a.dt, {1, T_max, hid}, 22, -1, 1);
    for (Set* s : {&live_, &stat_}) {
      const int64_t rows = s == &live_ ? T : T_max;
      s->x = Slot(head_rows(x, rows), be);
      s->y = Slot(Tensor(a.dt, {1, rows, hid}), be);
      s->dy = Slot(head_rows(dy, rows), be);
      s->dx = Slot(Tensor(a.dt, {1, rows, hid}), be);
      s->cu = s == &live_ ? &cu_live : &cu_stat;
      s->opt.use_graph = s == &stat_;
      s->opt.training = bwd_;
    }
  }
  void eager_live() override { run(live_); }
  void fixed_step() override { run(stat_); }
  void update() override {
    if (bwd_) {
      update_all({{&stat_.x, &live_.x}, {&stat_.dy, &live_.dy}});
    } else {
      update_all({{&stat_.x, &live_.x}});
    }
  }
  std::vector<Tensor> live_outputs() override { return bwd_ ? heads({&live_.y, &live_.dx}) : heads({&live_.y}); }
  std::vector<Tensor> static_outputs() override { return bwd_ ? heads({&stat_.y, &stat_.dx}) : heads({&stat_.y}); }

 private:
  struct Set {
    Slot x, y, dy, dx;
    const Slot* cu = nullptr;
    LayerRunOptions opt;
  };
  void run(Set& s) {
    layer_->forward(s.x, *s.cu, s.y, s.opt, be.ctx());
    if (bwd_) layer_->backward(s.dy, s.dx, be.ctx());
  }
  bool bwd_ = false;
  std::unique_ptr<LinearAttentionLayer> layer_;
  Set live_, stat_;
};

}  // namespace

std::unique_ptr<Workload> make_workload(const BenchArgs& a, int64_t T_max, int64_t N_max) {
  if (a.op == "gdn" || a.op == "kda") return std::make_unique<ChunkWorkload>(a, T_max, N_max);
  if (a.op == "conv") return std::make_unique<ConvWorkload>(a, T_max, N_max);
  if (a.op == "gdn_layer" || a.op == "kda_layer") return std::make_unique<LayerWorkload>(a, T_max, N_max);
  LINATTN_CHECK(false, "--op: expected gdn, kda, conv, gdn_layer or kda_layer with --mode all / --capacity / "
                "--sweep, got '", a.op, "'");
  return nullptr;
}

}  // namespace linattn::bench

// The GRAPH_CONTRACT.md section 8 sequence for CUDA GDN / KDA forward + backward, shared by
// test_cuda_graph_bwd.cc (tiers 1 / 2) and test_cuda_tier3_graph.cc (tier 3): static buffers for
// one capacity (T_max 520, N_max 6), eager warm-up, ONE capture of chunk_attn_fwd then
// chunk_attn_bwd (use_graph, caller workspaces and chunk tables), then the layouts of layouts()
// copied into the same buffers with NaN garbage in every padding row of every token input and of
// d_o, NaN in every output and gradient before each replay; each replay must equal the eager
// fixed-capacity calls bitwise, match the fp64 reference, keep padding gradients zero and pass
// d_final_state to dh0 exactly for zero-length sequences. Internal linkage: one copy per test.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <limits>

#include "cuda/common/cuda_graph.h"
#include "cuda_bwd_util.h"

namespace linattn::test {
namespace {

constexpr int64_t kTmax = 520, kNmax = 6;

std::vector<std::vector<int64_t>> layouts() {
  return {
      {100, 100, 100, 100, 100, 20}, {17, 250, 0, 64, 1, 100}, {300, 33, 0, 0, 0, 0},
      {5, 6, 7, 8, 9, 10},           {520, 0, 0, 0, 0, 0},     {63, 65, 127, 129, 31, 33},
      {100, 100, 100, 100, 100, 20},
  };
}

struct GraphCase {
  ChunkOp op;
  DType dt;
  int bt;
  bool h0, gate_in_kernel;
  DType grad_dtype;
  bool lower_bound = false;  // KDA: gate in kernel in the lower_bound = -5 form
  int segments = 0;          // ChunkAttnOptions::segments (0: the planner decides; tier 3: slots per sequence)
  bool saved = false;        // the captured forward fills a training cache its backward reads (eager: none)
};

// Device tensors of one capacity, with the host tensor each is filled from on every layout.
struct Static {
  DevArena arena;
  ChunkAttnInputs in;
  ChunkAttnOutputs out;
  ChunkAttnGrads g;
  TensorView d_o, dht, ws_fwd, ws_bwd;
  TensorView saved;  // training cache (GraphCase::saved), else absent
};

// (device tensor, host source) pairs of everything a layout refills; NaN sources for outputs.
std::vector<std::pair<TensorView*, const Tensor*>> slots(Static& s, const ChunkAttnData& d, const ChunkAttnCotangents& c,
                                                       const ChunkAttnOutTensors& o, const ChunkAttnGradTensors& g) {
  return {{&s.in.q, &d.q},
          {&s.in.k, &d.k},
          {&s.in.v, &d.v},
          {&s.in.g, &d.g},
          {&s.in.beta, &d.beta},
          {&s.in.A_log, &d.A_log},
          {&s.in.dt_bias, &d.dt_bias},
          {&s.in.initial_state, &d.initial_state},
          {&s.in.cu_seqlens, &d.cu_seqlens},
          {&s.d_o, &c.d_o},
          {&s.dht, &c.d_final_state},
          {&s.out.o, &o.o},
          {&s.out.final_state, &o.final_state},
          {&s.g.dq, &g.dq},
          {&s.g.dk, &g.dk},
          {&s.g.dv, &g.dv},
          {&s.g.dg, &g.dg},
          {&s.g.dbeta, &g.dbeta},
          {&s.g.dA_log, &g.dA_log},
          {&s.g.ddt_bias, &g.ddt_bias},
          {&s.g.dinitial_state, &g.dinitial_state}};
}

// Allocates (first layout) or refills every slot: new inputs and cotangents, NaN outputs.
void fill(Static& s, const ChunkAttnData& d, const ChunkAttnCotangents& c, DType grad_dtype, bool alloc,
          void* stream) {
  const ChunkAttnOutTensors ho = alloc_outputs(d, d.spec.dtype, DType::kF32);
  const ChunkAttnGradTensors hg = alloc_grads(d, grad_dtype, DType::kF32);
  for (auto [dst, src] : slots(s, d, c, ho, hg)) {
    if (alloc) *dst = src->defined() ? s.arena.alloc(src->dtype(), src->shape()) : TensorView{};
    if (dst->defined()) copy_tensor(*dst, src->view(), ExecContext{stream});
  }
  if (alloc) {
    const int64_t nt = (kTmax + d.spec.opt.chunk_size - 1) / d.spec.opt.chunk_size + kNmax - 1;
    s.in.chunk_indices = s.arena.alloc(DType::kI32, {nt, 2});
    s.in.chunk_offsets = s.arena.alloc(DType::kI32, {kNmax + 1});
    const size_t fb = chunk_attn_fwd_workspace_bytes(s.in, d.opt());
    const size_t bb = chunk_attn_bwd_workspace_bytes(s.in, d.opt());
    s.ws_fwd = s.arena.alloc(DType::kI32, {static_cast<int64_t>(fb / 4 + 1)});
    s.ws_bwd = s.arena.alloc(DType::kI32, {static_cast<int64_t>(bb / 4 + 1)});
  }
  ASSERT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), cudaSuccess);
}

void run_ops(const Static& s, const ChunkAttnOptions& opt, void* stream) {
  ChunkAttnInputs in = s.in;
  ChunkAttnOutputs out = s.out;
  if (s.saved.defined()) {
    out.saved = s.saved.data;
    in.saved = s.saved.data;
    out.saved_bytes = in.saved_bytes = s.saved.nbytes();
  }
  chunk_attn_fwd(s.in, out, opt, ExecContext{stream, s.ws_fwd.data, s.ws_fwd.nbytes()});
  chunk_attn_bwd(in, s.d_o, s.dht, s.g, opt, ExecContext{stream, s.ws_bwd.data, s.ws_bwd.nbytes()});
}

void poison_padding(ChunkAttnData& d, ChunkAttnCotangents& c) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (Tensor* t : {&d.q, &d.k, &d.v, &d.g, &d.beta, &c.d_o}) {
    const int64_t row = t->numel() / d.spec.T;
    for (int64_t r = d.valid_tokens; r < d.spec.T; ++r)
      for (int64_t i = 0; i < row; ++i) t->set(r * row + i, nan);
  }
}

ChunkAttnSpec spec_for(const GraphCase& gc) {
  ChunkAttnSpec spec;
  spec.opt.op = gc.op;
  spec.dtype = gc.dt;
  const bool sanitized = std::getenv("LINATTN_SANITIZED") != nullptr;  // racecheck: half the heads
  spec.H = sanitized ? 1 : 2;
  spec.HV = sanitized ? 2 : 4;
  spec.K = spec.V = 128;
  spec.has_h0 = gc.h0;
  spec.opt.chunk_size = gc.bt;
  spec.opt.output_final_state = true;
  spec.opt.use_graph = true;
  spec.opt.segments = gc.segments;
  spec.opt.max_num_seqs = kNmax;
  spec.opt.use_gate_in_kernel = gc.gate_in_kernel;
  spec.opt.use_qk_l2norm_in_kernel = gc.gate_in_kernel;
  spec.opt.use_beta_sigmoid_in_kernel = gc.gate_in_kernel;
  spec.opt.state_v_first = gc.gate_in_kernel;
  spec.opt.has_lower_bound = gc.lower_bound;
  spec.opt.lower_bound = gc.lower_bound ? -5.0 : 0.0;
  spec.opt.safe_gate = gc.lower_bound;
  spec.gate = GateDist::kMixedHeads;
  return spec;
}

// Layout idx: data with poisoned padding and its cotangents (d_final_state always present).
std::pair<ChunkAttnData, ChunkAttnCotangents> layout_data(ChunkAttnSpec spec, const std::vector<int64_t>& lens,
                                                          int idx) {
  spec.seqlens = lens;
  int64_t total = 0;
  for (int64_t l : lens) total += l;
  spec.pad_tokens = kTmax - total;
  spec.seed = 100 + idx;
  ChunkAttnData d = make_chunk_attn(spec);
  Rng rng(1000 + idx);
  ChunkAttnCotangents c = random_cotangents(d, rng, spec.dtype, true);
  return {d, c};
}

void check_results(const ChunkAttnData& d, const ChunkAttnCotangents& c, const ChunkAttnGradTensors& ref,
                   const ChunkAttnGradTensors& got, DType dt) {
  EXPECT_TRUE(bwd_close(d, ref, got, dt));
  EXPECT_TRUE(grads_padding_zero(d, got));
  EXPECT_TRUE(grads_finite(got));
  check_zero_length_dh0(d, c, got);
}

// The section 8 sequence over `lens` (layout indices shift the seeds by seed0): capture(fn) once
// on the first layout after an eager warm-up, replay() `reps` times per layout, each compared
// with the eager fixed-capacity calls and the reference.
void run_sequence(const GraphCase& gc, const std::vector<std::vector<int64_t>>& lens, int seed0, int reps,
                  cudaStream_t stream, const std::function<void(const std::function<void()>&)>& capture,
                  const std::function<void()>& replay) {
  SCOPED_TRACE(std::string(gc.op == ChunkOp::kKda ? "kda " : "gdn ") + dtype_name(gc.dt) + (gc.saved ? " saved" : "") + " segments=" +
               std::to_string(gc.segments) + " bt=" +
               std::to_string(gc.bt) + " h0=" + std::to_string(gc.h0) + " gate_in_kernel=" +
               std::to_string(gc.gate_in_kernel) + " lower_bound=" + std::to_string(gc.lower_bound));
  const ChunkAttnSpec spec = spec_for(gc);
  Static st, eager;
  for (size_t idx = 0; idx < lens.size(); ++idx) {
    SCOPED_TRACE("layout " + std::to_string(idx));
    auto [d, c] = layout_data(spec, lens[idx], seed0 + static_cast<int>(idx));
    const ChunkAttnGradTensors ref = ref_backward(d, c);
    const ChunkAttnOutTensors ref_o = ref_forward(d);
    poison_padding(d, c);
    if (idx == 0) {
      fill(st, d, c, gc.grad_dtype, true, stream);
      fill(eager, d, c, gc.grad_dtype, true, stream);
      if (gc.saved) {  // sized before the capture: the query depends on shapes and options only
        const size_t sb = chunk_attn_saved_bytes(st.in, d.opt());
        if (gc.segments <= 1) {
          EXPECT_GT(sb, 0u) << "no training cache on the chunked path";
        }
        st.saved = st.arena.alloc(DType::kI32, {static_cast<int64_t>(sb / 4 + 64)});
      }
      run_ops(st, d.opt(), stream);  // eager warm-up
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      capture([&] { run_ops(st, d.opt(), stream); });
    }
    for (int rep = 0; rep < reps; ++rep) {
      SCOPED_TRACE("replay " + std::to_string(rep));
      fill(st, d, c, gc.grad_dtype, false, stream);
      replay();
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      const ChunkAttnGradTensors gg = grads_to_host(st.g);
      fill(eager, d, c, gc.grad_dtype, false, stream);
      run_ops(eager, d.opt(), stream);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      EXPECT_TRUE(grads_bitwise(gg, grads_to_host(eager.g))) << "graph replay gradients differ from eager fixed";
      check_results(d, c, ref, gg, gc.dt);
      ChunkAttnOutTensors got_o;
      got_o.o = download(st.out.o);
      got_o.final_state = download(st.out.final_state);
      EXPECT_TRUE(same_bits(got_o.o, download(eager.out.o))) << "graph replay o differs from eager";
      EXPECT_TRUE(same_bits(got_o.final_state, download(eager.out.final_state))) << "graph replay ht differs";
      EXPECT_TRUE(fwd_close(d, ref_o, got_o, gc.dt));
    }
  }
}

// The sequence captured with cuda::CudaGraph (at least `min_nodes` nodes).
void run_cuda_graph_case(const GraphCase& gc, size_t min_nodes) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    cuda::CudaGraph graph(stream);
    auto all = layouts();
    const bool sanitized = std::getenv("LINATTN_SANITIZED") != nullptr;  // racecheck: keep it short
    if (sanitized) all.resize(2);
    run_sequence(
        gc, all, 100, sanitized ? 1 : 2, stream,
        [&](const std::function<void()>& fn) {
          graph.begin();
          fn();
          graph.end();
          EXPECT_GE(graph.num_nodes(), min_nodes);
        },
        [&] { graph.replay(); });
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace linattn::test

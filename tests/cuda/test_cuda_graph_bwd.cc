// GRAPH_CONTRACT.md section 8 for the CUDA GDN forward + backward: static buffers for one capacity,
// eager warm-up, ONE stream capture of chunk_attn_fwd then chunk_attn_bwd (use_graph = true, caller
// workspaces, caller chunk tables), then seven layouts (dense batch, varlen with a zero-length
// sequence, zero-length tails, actual T << T_max, one sequence filling the bucket, another split,
// the first again to catch stale metadata) copied into the same buffers with NaN garbage in every
// padding row of every token input and of d_o, and NaN in every gradient before each replay.
// Each replay must equal the eager fixed-capacity calls bitwise (o, final state, every gradient
// including the zeroed padding rows), match the fp64 reference gradients, and pass d_final_state
// to dh0 exactly for zero-length sequences. The public linattn::Graph runs the same sequence.
// BT 64 and 32, bf16 and fp16, with and without h0, gate variants, fp32 and input-dtype gradients.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>

#include "cuda/common/cuda_graph.h"
#include "cuda_bwd_util.h"
#include "linattn/graph.h"

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
  DType dt;
  int bt;
  bool h0, gate_in_kernel;
  DType grad_dtype;
};

struct Static {
  DevArena arena;
  ChunkAttnInputs in;
  ChunkAttnOutputs out;
  ChunkAttnGrads g;
  TensorView d_o, dht, ws_fwd, ws_bwd;
};

TensorView alloc_as(DevArena& a, const Tensor& t) { return t.defined() ? a.alloc(t.dtype(), t.shape()) : TensorView{}; }

void make_static(Static& s, const ChunkAttnData& d, const ChunkAttnCotangents& c, DType grad_dtype) {
  s.in.q = alloc_as(s.arena, d.q);
  s.in.k = alloc_as(s.arena, d.k);
  s.in.v = alloc_as(s.arena, d.v);
  s.in.g = alloc_as(s.arena, d.g);
  s.in.beta = alloc_as(s.arena, d.beta);
  s.in.A_log = alloc_as(s.arena, d.A_log);
  s.in.dt_bias = alloc_as(s.arena, d.dt_bias);
  s.in.initial_state = alloc_as(s.arena, d.initial_state);
  s.in.cu_seqlens = alloc_as(s.arena, d.cu_seqlens);
  s.in.chunk_indices = s.arena.alloc(DType::kI32, {(kTmax + d.spec.opt.chunk_size - 1) / d.spec.opt.chunk_size + kNmax - 1, 2});
  s.in.chunk_offsets = s.arena.alloc(DType::kI32, {kNmax + 1});
  const ChunkAttnOutTensors ho = alloc_outputs(d, d.spec.dtype, DType::kF32);
  s.out.o = alloc_as(s.arena, ho.o);
  s.out.final_state = alloc_as(s.arena, ho.final_state);
  const ChunkAttnGradTensors hg = alloc_grads(d, grad_dtype, DType::kF32);
  s.g.dq = alloc_as(s.arena, hg.dq);
  s.g.dk = alloc_as(s.arena, hg.dk);
  s.g.dv = alloc_as(s.arena, hg.dv);
  s.g.dg = alloc_as(s.arena, hg.dg);
  s.g.dbeta = alloc_as(s.arena, hg.dbeta);
  s.g.dA_log = alloc_as(s.arena, hg.dA_log);
  s.g.ddt_bias = alloc_as(s.arena, hg.ddt_bias);
  s.g.dinitial_state = alloc_as(s.arena, hg.dinitial_state);
  s.d_o = alloc_as(s.arena, c.d_o);
  s.dht = alloc_as(s.arena, c.d_final_state);
  const size_t fb = chunk_attn_fwd_workspace_bytes(s.in, d.opt());
  const size_t bb = chunk_attn_bwd_workspace_bytes(s.in, d.opt());
  s.ws_fwd = s.arena.alloc(DType::kI32, {static_cast<int64_t>(fb / 4 + 1)});
  s.ws_bwd = s.arena.alloc(DType::kI32, {static_cast<int64_t>(bb / 4 + 1)});
}

void copy_in(const TensorView& dst, const Tensor& src, void* stream) {
  if (dst.defined()) copy_tensor(dst, src.view(), ExecContext{stream});
}

// New content (inputs, cotangents, cu_seqlens) and NaN in every output and gradient.
void fill(const Static& s, const ChunkAttnData& d, const ChunkAttnCotangents& c, DType grad_dtype, void* stream) {
  copy_in(s.in.q, d.q, stream);
  copy_in(s.in.k, d.k, stream);
  copy_in(s.in.v, d.v, stream);
  copy_in(s.in.g, d.g, stream);
  copy_in(s.in.beta, d.beta, stream);
  copy_in(s.in.A_log, d.A_log, stream);
  copy_in(s.in.dt_bias, d.dt_bias, stream);
  copy_in(s.in.initial_state, d.initial_state, stream);
  copy_in(s.in.cu_seqlens, d.cu_seqlens, stream);
  copy_in(s.d_o, c.d_o, stream);
  copy_in(s.dht, c.d_final_state, stream);
  const ChunkAttnOutTensors ho = alloc_outputs(d, d.spec.dtype, DType::kF32);
  copy_in(s.out.o, ho.o, stream);
  copy_in(s.out.final_state, ho.final_state, stream);
  const ChunkAttnGradTensors hg = alloc_grads(d, grad_dtype, DType::kF32);
  copy_in(s.g.dq, hg.dq, stream);
  copy_in(s.g.dk, hg.dk, stream);
  copy_in(s.g.dv, hg.dv, stream);
  copy_in(s.g.dg, hg.dg, stream);
  copy_in(s.g.dbeta, hg.dbeta, stream);
  copy_in(s.g.dA_log, hg.dA_log, stream);
  copy_in(s.g.ddt_bias, hg.ddt_bias, stream);
  copy_in(s.g.dinitial_state, hg.dinitial_state, stream);
  ASSERT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), cudaSuccess);
}

void fwd_bwd(const Static& s, const ChunkAttnOptions& opt, void* stream) {
  chunk_attn_fwd(s.in, s.out, opt, ExecContext{stream, s.ws_fwd.data, s.ws_fwd.nbytes()});
  chunk_attn_bwd(s.in, s.d_o, s.dht, s.g, opt, ExecContext{stream, s.ws_bwd.data, s.ws_bwd.nbytes()});
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
  spec.dtype = gc.dt;
  spec.H = 2;
  spec.HV = 4;
  spec.K = spec.V = 128;
  spec.has_h0 = gc.h0;
  spec.opt.chunk_size = gc.bt;
  spec.opt.output_final_state = true;
  spec.opt.use_graph = true;
  spec.opt.max_num_seqs = kNmax;
  spec.opt.use_gate_in_kernel = gc.gate_in_kernel;
  spec.opt.use_qk_l2norm_in_kernel = gc.gate_in_kernel;
  spec.opt.use_beta_sigmoid_in_kernel = gc.gate_in_kernel;
  spec.opt.state_v_first = gc.gate_in_kernel;
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

ChunkAttnGradTensors unpoisoned_ref(const ChunkAttnData& d, const ChunkAttnCotangents& c) { return ref_backward(d, c); }

void check_results(const ChunkAttnData& d, const ChunkAttnCotangents& c, const ChunkAttnGradTensors& ref,
                   const ChunkAttnGradTensors& got, DType dt) {
  EXPECT_TRUE(bwd_close(d, ref, got, dt));
  EXPECT_TRUE(grads_padding_zero(d, got));
  if (!got.dinitial_state.defined()) return;
  const int64_t per = got.dinitial_state.numel() / kNmax;
  for (int64_t n = 0; n < kNmax; ++n) {
    if (d.cu_seqlens.get(n + 1) != d.cu_seqlens.get(n)) continue;
    for (int64_t i = n * per; i < (n + 1) * per; ++i)
      ASSERT_EQ(got.dinitial_state.get(i), c.d_final_state.get(i)) << "zero-length sequence " << n;
  }
}

void run_graph_case(const GraphCase& gc) {
  SCOPED_TRACE(std::string(dtype_name(gc.dt)) + " bt=" + std::to_string(gc.bt) + " h0=" +
               std::to_string(gc.h0) + " gate_in_kernel=" + std::to_string(gc.gate_in_kernel));
  const ChunkAttnSpec spec = spec_for(gc);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Static st, eager;
  cuda::CudaGraph graph(stream);
  auto all = layouts();
  if (std::getenv("LINATTN_SANITIZED")) all.resize(3);
  for (size_t idx = 0; idx < all.size(); ++idx) {
    SCOPED_TRACE("layout " + std::to_string(idx));
    auto [d, c] = layout_data(spec, all[idx], static_cast<int>(idx));
    const ChunkAttnGradTensors ref = unpoisoned_ref(d, c);
    const ChunkAttnOutTensors ref_o = ref_forward(d);
    poison_padding(d, c);
    if (idx == 0) {
      make_static(st, d, c, gc.grad_dtype);
      make_static(eager, d, c, gc.grad_dtype);
      fill(st, d, c, gc.grad_dtype, stream);
      fwd_bwd(st, d.opt(), stream);  // eager warm-up
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      graph.begin();
      fwd_bwd(st, d.opt(), stream);
      graph.end();
      EXPECT_GE(graph.num_nodes(), 7u);
    }
    for (int rep = 0; rep < 2; ++rep) {
      SCOPED_TRACE("replay " + std::to_string(rep));
      fill(st, d, c, gc.grad_dtype, stream);
      graph.replay();
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      const ChunkAttnGradTensors gg = grads_to_host(st.g);
      const Tensor o_g = download(st.out.o), ht_g = download(st.out.final_state);

      fill(eager, d, c, gc.grad_dtype, stream);
      fwd_bwd(eager, d.opt(), stream);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      const ChunkAttnGradTensors ge = grads_to_host(eager.g);
      EXPECT_TRUE(grads_bitwise(gg, ge)) << "graph replay gradients differ from eager fixed-capacity";
      EXPECT_TRUE(same_bits(o_g, download(eager.out.o))) << "graph replay o differs from eager";
      EXPECT_TRUE(same_bits(ht_g, download(eager.out.final_state))) << "graph replay final state differs";
      check_results(d, c, ref, gg, gc.dt);
      ChunkAttnOutTensors got_o;
      got_o.o = o_g;
      got_o.final_state = ht_g;
      EXPECT_TRUE(fwd_close(d, ref_o, got_o, gc.dt));
    }
  }
  cudaStreamDestroy(stream);
}

TEST(CudaGraphGdnFwdBwd, SevenLayoutsReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  std::vector<GraphCase> gcs = {{DType::kBF16, 64, true, true, DType::kF32},
                                {DType::kF16, 64, false, false, DType::kF16},
                                {DType::kBF16, 32, true, false, DType::kBF16},
                                {DType::kF16, 32, true, true, DType::kF32}};
  if (std::getenv("LINATTN_SANITIZED")) gcs.resize(1);
  for (const GraphCase& gc : gcs) run_graph_case(gc);
}

// The public linattn::Graph on CUDA around the public ops (forward + backward in one graph).
TEST(CudaGraphGdnFwdBwd, PublicGraphApi) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  const GraphCase gc{DType::kBF16, 64, true, true, DType::kBF16};
  const ChunkAttnSpec spec = spec_for(gc);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Static st, eager;
  Graph graph(cuda0(), stream);
  const auto all = layouts();
  int idx = 0;
  for (const auto& lens : {all[1], all[4], all[5]}) {
    SCOPED_TRACE("layout " + std::to_string(idx));
    auto [d, c] = layout_data(spec, lens, 50 + idx);
    const ChunkAttnGradTensors ref = unpoisoned_ref(d, c);
    poison_padding(d, c);
    if (idx == 0) {
      make_static(st, d, c, gc.grad_dtype);
      make_static(eager, d, c, gc.grad_dtype);
      fill(st, d, c, gc.grad_dtype, stream);
      fwd_bwd(st, d.opt(), stream);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      graph.capture([&] { fwd_bwd(st, d.opt(), stream); });
    }
    fill(st, d, c, gc.grad_dtype, stream);
    graph.replay();
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    fill(eager, d, c, gc.grad_dtype, stream);
    fwd_bwd(eager, d.opt(), stream);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const ChunkAttnGradTensors gg = grads_to_host(st.g);
    EXPECT_TRUE(grads_bitwise(gg, grads_to_host(eager.g)));
    check_results(d, c, ref, gg, gc.dt);
    ++idx;
  }
  graph.reset();
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace linattn::test

// GRAPH_CONTRACT.md section 8 for the CUDA GDN and KDA forward: static buffers for one capacity, eager
// warm-up, one stream capture, then six layouts (dense batch, varlen, zero-length tails,
// actual T < T_max, one sequence filling the bucket, another split; then the first again to catch
// stale metadata) copied into the same buffers with NaN garbage in every padding row of every
// input and a marker value in the padding rows of o. Each replay must equal the eager
// fixed-capacity call bitwise (o, final state, padding), match the fp64 reference, and leave the
// padding rows of o untouched. BT 64 and 32, bf16 and fp16, with and without h0, gate variants
// (KDA: gate in kernel, lower_bound = -5 sigmoid form, precomputed gates with -1000 entries).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "cuda/common/cuda_graph.h"
#include "linattn/graph.h"
#include "cuda_test_util.h"
#include "linattn/error.h"
#include "linattn/meta.h"
#include "meta/chunk_attn_desc.h"

namespace linattn::test {
namespace {

constexpr int64_t kTmax = 520, kNmax = 6;
constexpr double kMarker = 7.0;

std::vector<std::vector<int64_t>> layouts() {
  return {
      {100, 100, 100, 100, 100, 20},  // dense-ish batch filling the bucket
      {17, 250, 0, 64, 1, 100},       // varlen with a zero-length sequence
      {300, 33, 0, 0, 0, 0},          // zero-length tail
      {5, 6, 7, 8, 9, 10},            // actual T far below T_max
      {520, 0, 0, 0, 0, 0},           // one sequence fills the bucket
      {63, 65, 127, 129, 31, 33},     // another split around chunk edges
      {100, 100, 100, 100, 100, 20},  // first layout again: no stale tables
  };
}

void poison_padding(ChunkAttnData& d) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (Tensor* t : {&d.q, &d.k, &d.v, &d.g, &d.beta}) {
    const int64_t row = t->numel() / d.spec.T;
    for (int64_t r = d.valid_tokens; r < d.spec.T; ++r)
      for (int64_t i = 0; i < row; ++i) t->set(r * row + i, nan);
  }
}

struct Static {
  DevArena arena;
  ChunkAttnInputs in;
  ChunkAttnOutputs out;
  TensorView workspace;
};

// Static buffers shaped like `d` (which has T = kTmax, N = kNmax) plus chunk tables.
void make_static(Static& s, const ChunkAttnData& d, int bt) {
  s.in.q = s.arena.alloc(d.q.dtype(), d.q.shape());
  s.in.k = s.arena.alloc(d.k.dtype(), d.k.shape());
  s.in.v = s.arena.alloc(d.v.dtype(), d.v.shape());
  s.in.g = s.arena.alloc(d.g.dtype(), d.g.shape());
  s.in.beta = s.arena.alloc(d.beta.dtype(), d.beta.shape());
  if (d.A_log.defined()) s.in.A_log = s.arena.alloc(d.A_log.dtype(), d.A_log.shape());
  if (d.dt_bias.defined()) s.in.dt_bias = s.arena.alloc(d.dt_bias.dtype(), d.dt_bias.shape());
  if (d.initial_state.defined())
    s.in.initial_state = s.arena.alloc(d.initial_state.dtype(), d.initial_state.shape());
  s.in.cu_seqlens = s.arena.alloc(d.cu_seqlens.dtype(), d.cu_seqlens.shape());
  const int64_t nt_max = (kTmax + bt - 1) / bt + kNmax - 1;
  s.in.chunk_indices = s.arena.alloc(DType::kI32, {nt_max, 2});
  s.in.chunk_offsets = s.arena.alloc(DType::kI32, {kNmax + 1});
  const ChunkAttnOutTensors host = alloc_outputs(d, d.spec.dtype, DType::kF32);
  s.out.o = s.arena.alloc_like(host.o);
  if (host.final_state.defined()) s.out.final_state = s.arena.alloc_like(host.final_state);
  const meta::ChunkAttnDesc desc = meta::describe_chunk_attn(s.in, d.opt());
  const size_t bytes = api::chunk_attn_fwd_workspace_bytes_cuda(desc, s.in, d.opt());
  s.workspace = s.arena.alloc(DType::kI32, {static_cast<int64_t>(bytes / 4 + 1)});
}

void fill(const Static& s, const ChunkAttnData& d, const Tensor& o_init, void* stream) {
  const ExecContext ctx{stream};
  copy_tensor(s.in.q, d.q.view(), ctx);
  copy_tensor(s.in.k, d.k.view(), ctx);
  copy_tensor(s.in.v, d.v.view(), ctx);
  copy_tensor(s.in.g, d.g.view(), ctx);
  copy_tensor(s.in.beta, d.beta.view(), ctx);
  if (d.A_log.defined()) copy_tensor(s.in.A_log, d.A_log.view(), ctx);
  if (d.dt_bias.defined()) copy_tensor(s.in.dt_bias, d.dt_bias.view(), ctx);
  if (d.initial_state.defined()) copy_tensor(s.in.initial_state, d.initial_state.view(), ctx);
  copy_tensor(s.in.cu_seqlens, d.cu_seqlens.view(), ctx);
  copy_tensor(s.out.o, o_init.view(), ctx);
  if (s.out.final_state.defined()) {
    Tensor nan = nan_tensor(DType::kF32, std::vector<int64_t>(s.out.final_state.shape.begin(),
                                                              s.out.final_state.shape.begin() + 4));
    copy_tensor(s.out.final_state, nan.view(), ctx);
    ASSERT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), cudaSuccess);
  }
  ASSERT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), cudaSuccess);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.defined() == b.defined() &&
         (!a.defined() || std::memcmp(a.data<char>(), b.data<char>(), a.view().nbytes()) == 0);
}

struct GraphCase {
  DType dt;
  int bt;
  bool h0, gate_in_kernel;
  ChunkOp op = ChunkOp::kGdn;
  bool lower_bound = false;  // KDA: lower_bound = -5 gate form
};

void run_graph_case(const GraphCase& gc) {
  SCOPED_TRACE(std::string(dtype_name(gc.dt)) + " bt=" + std::to_string(gc.bt) + " h0=" +
               std::to_string(gc.h0) + " gate_in_kernel=" + std::to_string(gc.gate_in_kernel) +
               (gc.op == ChunkOp::kKda ? " kda" : " gdn") + (gc.lower_bound ? " lower_bound" : ""));
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
  spec.gate = GateDist::kMixedHeads;
  spec.opt.op = gc.op;
  if (gc.lower_bound) {
    spec.opt.has_lower_bound = true;
    spec.opt.lower_bound = -5.0;
    spec.opt.safe_gate = true;
    spec.has_A_log = false;
  }
  if (gc.op == ChunkOp::kKda && !gc.gate_in_kernel) spec.extreme_gate_frac = 0.05;

  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Static st, eager;
  cuda::CudaGraph graph(stream);
  int idx = 0;
  auto all = layouts();
  if (std::getenv("LINATTN_SANITIZED")) all.resize(3);  // compute-sanitizer runs: fewer layouts
  for (const auto& lens : all) {
    SCOPED_TRACE("layout " + std::to_string(idx));
    spec.seqlens = lens;
    int64_t total = 0;
    for (int64_t l : lens) total += l;
    spec.pad_tokens = kTmax - total;
    spec.seed = 100 + idx;
    ChunkAttnData d = make_chunk_attn(spec);
    poison_padding(d);
    Tensor o_init = full(gc.dt, {1, kTmax, spec.HV, spec.V}, kMarker);
    if (idx == 0) {
      make_static(st, d, gc.bt);
      make_static(eager, d, gc.bt);
      fill(st, d, o_init, stream);
      const meta::ChunkAttnDesc desc = meta::describe_chunk_attn(st.in, d.opt());
      const ExecContext ctx{stream, st.workspace.data, st.workspace.nbytes()};
      api::chunk_attn_fwd_cuda(desc, st.in, st.out, d.opt(), ctx);  // eager warm-up
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      graph.begin();
      api::chunk_attn_fwd_cuda(desc, st.in, st.out, d.opt(), ctx);
      graph.end();
      EXPECT_GE(graph.num_nodes(), 1u);
    }
    fill(st, d, o_init, stream);
    graph.replay();
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const Tensor o_g = download(st.out.o), ht_g = download(st.out.final_state);

    fill(eager, d, o_init, stream);
    const meta::ChunkAttnDesc desc = meta::describe_chunk_attn(eager.in, d.opt());
    api::chunk_attn_fwd_cuda(desc, eager.in, eager.out, d.opt(),
                             ExecContext{stream, eager.workspace.data, eager.workspace.nbytes()});
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const Tensor o_e = download(eager.out.o), ht_e = download(eager.out.final_state);
    EXPECT_TRUE(bitwise_equal(o_g, o_e)) << "graph replay o differs from eager fixed-capacity";
    EXPECT_TRUE(bitwise_equal(ht_g, ht_e)) << "graph replay final state differs from eager";

    ChunkAttnOutTensors got;
    got.o = o_g;
    got.final_state = ht_g;
    EXPECT_TRUE(fwd_close(d, ref_forward(d), got, gc.dt));
    const int64_t row = spec.HV * spec.V;
    for (int64_t t = d.valid_tokens; t < kTmax; ++t)
      for (int64_t i = 0; i < row; ++i)
        ASSERT_EQ(o_g.get(t * row + i), kMarker) << "padding row " << t << " of o was written";
    ++idx;
  }
  cudaStreamDestroy(stream);
}

TEST(CudaGraphGdnFwd, SixLayoutsReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  std::vector<GraphCase> gcs = {{DType::kBF16, 64, true, true}, {DType::kF16, 64, false, false},
                                {DType::kBF16, 32, true, false}, {DType::kF16, 32, true, true}};
  if (std::getenv("LINATTN_SANITIZED")) gcs.resize(1);
  for (const GraphCase& gc : gcs) run_graph_case(gc);
}

TEST(CudaGraphKdaFwd, SixLayoutsReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  const ChunkOp kda = ChunkOp::kKda;
  std::vector<GraphCase> gcs = {{DType::kBF16, 64, true, true, kda}, {DType::kF16, 32, false, false, kda},
                                {DType::kBF16, 32, true, true, kda, true}, {DType::kF16, 64, true, false, kda}};
  if (std::getenv("LINATTN_SANITIZED")) gcs.resize(1);
  for (const GraphCase& gc : gcs) run_graph_case(gc);
}

// The public linattn::Graph on CUDA around the public op: capture, replay over layouts, bitwise
// equal to the eager fixed-capacity call; an eager call inside the capture is refused
// (eager-backend) and the capture is dropped.
TEST(CudaGraphGdnFwd, PublicGraphApi) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ChunkAttnSpec spec;
  spec.dtype = DType::kBF16;
  spec.H = 1;
  spec.HV = 2;
  spec.K = spec.V = 128;
  spec.opt.output_final_state = true;
  spec.opt.use_graph = true;
  spec.opt.max_num_seqs = kNmax;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Static st, eager;
  Graph graph(cuda0(), stream);
  int idx = 0;
  for (const auto& lens : {layouts()[1], layouts()[4], layouts()[5]}) {
    SCOPED_TRACE("layout " + std::to_string(idx));
    spec.seqlens = lens;
    int64_t total = 0;
    for (int64_t l : lens) total += l;
    spec.pad_tokens = kTmax - total;
    spec.seed = 7 + idx;
    ChunkAttnData d = make_chunk_attn(spec);
    poison_padding(d);
    Tensor o_init = full(DType::kBF16, {1, kTmax, spec.HV, spec.V}, kMarker);
    if (idx == 0) {
      make_static(st, d, 64);
      make_static(eager, d, 64);
      const ExecContext ctx{stream, st.workspace.data, st.workspace.nbytes()};
      ChunkAttnOptions eager_opt = d.opt();
      eager_opt.use_graph = false;
      ChunkAttnInputs eager_in = st.in;
      eager_in.chunk_indices = eager_in.chunk_offsets = TensorView{};
      try {
        graph.capture([&] { chunk_attn_fwd(eager_in, st.out, eager_opt, ctx); });
        FAIL() << "eager call inside a CUDA capture was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.category(), FailureCategory::kEagerBackend) << e.what();
      }
      EXPECT_EQ(graph.state(), Graph::State::kEmpty);
      graph.capture([&] { chunk_attn_fwd(st.in, st.out, d.opt(), ctx); });
      EXPECT_GE(graph.num_nodes(), 3u);
      EXPECT_EQ(graph.node_names().front(), "kernel");
    }
    fill(st, d, o_init, stream);
    graph.replay();
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    fill(eager, d, o_init, stream);
    chunk_attn_fwd(eager.in, eager.out, d.opt(), ExecContext{stream, eager.workspace.data, eager.workspace.nbytes()});
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ChunkAttnOutTensors got{download(st.out.o), download(st.out.final_state)};
    EXPECT_TRUE(bitwise_equal(got.o, download(eager.out.o)));
    EXPECT_TRUE(bitwise_equal(got.final_state, download(eager.out.final_state)));
    EXPECT_TRUE(fwd_close(d, ref_forward(d), got, DType::kBF16));
    ++idx;
  }
  graph.reset();
  cudaStreamDestroy(stream);
}

// prepare_chunk_meta (public, CUDA tensors) equals the eager host tables plus sentinels.
TEST(CudaGraphGdnFwd, PublicStaticChunkMeta) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  const Capacity cap{kTmax, kNmax, 32};
  const Tensor cu = cu_seqlens_tensor(layouts()[1], DType::kI64);
  DevArena arena;
  const TensorView dcu = arena.upload(cu);
  const TensorView di = arena.alloc_like(full(DType::kI32, {cap.NT_max(), 2}, 99));
  const TensorView dof = arena.alloc_like(full(DType::kI32, {kNmax + 1}, 99));
  prepare_chunk_meta(cap, dcu, di, dof);
  const Tensor gi = download(di), go = download(dof);
  const ChunkMetaTables want = prepare_chunk_meta_eager(cu.view(), 32, kTmax);
  for (int64_t i = 0; i <= kNmax; ++i) ASSERT_EQ(go.get(i), want.chunk_offsets.get(i)) << "offset " << i;
  for (int64_t r = 0; r < cap.NT_max(); ++r)
    for (int e = 0; e < 2; ++e)
      ASSERT_EQ(gi.get(2 * r + e), r < want.num_chunks ? want.chunk_indices.get(2 * r + e) : (e ? 0 : -1))
          << "row " << r;
}

TEST(CudaGraphGdnFwd, GraphModeWithoutWorkspaceIsAnAddressError) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ChunkAttnSpec spec;
  spec.dtype = DType::kBF16;
  spec.K = spec.V = 128;
  spec.seqlens = {10, 20};
  spec.opt.use_graph = true;
  spec.opt.max_num_seqs = 2;
  const ChunkAttnData d = make_chunk_attn(spec);
  auto dev = to_device(d);
  const meta::ChunkAttnDesc desc = meta::describe_chunk_attn(dev->in, d.opt());
  try {
    api::chunk_attn_fwd_cuda(desc, dev->in, dev->out, d.opt(), ExecContext{});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), FailureCategory::kAddressOrLifetime) << e.what();
  }
}

}  // namespace
}  // namespace linattn::test

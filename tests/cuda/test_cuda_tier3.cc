// CUDA tier 3 (exact in-sequence splitting, cuda/seg/tier3.h), forward: against the fp64 reference
// and against tier 1 (segments = 1) at segments 2, 3 and 8 (8 leaves empty trailing slots on the
// short sequences), on uneven varlen layouts with zero-length sequences and padding, int64
// cu_seqlens, GVA, no h0, state_v_first, in-kernel gates, strong / extreme decays, V = 64, BT 64
// and 32, bf16 and fp16, every pass-2 V-slice, KDA (in-kernel gate, lower_bound form, -1000
// gates). Outputs are NaN-prefilled: unwritten elements fail; padding rows of o stay untouched.
// Tier 3 twice gives the same bits (fixed launch order, no atomics). The state pass on both kernels
// (LINATTN_CUDA_SEG_WGMMA=0: gdn_fused.cu, =1: the pipelined wgmma kernel's state-pass mode where
// eligible, checked to run). The first-segment schedule (LINATTN_CUDA_TIER3_FIRST=1: one
// sequence, the first segment's forward beside the state pass; CudaTier3First): single-sequence
// layouts against the reference, tier 1 and the default schedule at segments 2, 3 and 9 (checked to
// run), and one graph capture replayed on new sequence lengths bitwise equal to eager fixed calls.
// The tma3 state pass (CudaTier3SegVariants): bitwise the cp.async one; the opt-in tensor-core combines (tc / tc8):
// the reference bars, tier 1 and the default at the same bars (another summation order); the switch's errors.
// PDL (LINATTN_CUDA_PDL=1, CudaTier3Pdl / CudaTier3PdlGraph): the same kernels launched with programmatic
// dependencies, bitwise the plain launches, eager and in graphs replayed on new lengths (both schedules).
// LINATTN_SANITIZED=1: fewer cases (compute-sanitizer runs).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/common/cuda_graph.h"
#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_fused_wg.h"
#include "cuda/seg/seg_pass.h"
#include "cuda/seg/tier3.h"
#include "cuda_fwd_util.h"
#include "linattn/error.h"
#include "linattn/ops.h"
#include "meta/chunk_attn_desc.h"

namespace linattn::test {
namespace {

bool sanitized() { return std::getenv("LINATTN_SANITIZED") != nullptr; }

std::vector<FwdCase> cases(DType dt, int bt, ChunkOp op) {
  std::vector<FwdCase> r;
  {
    ChunkAttnSpec s = layer_options_spec(dt, bt, op);  // state_v_first, in-kernel gate / l2norm / sigmoid
    s.seqlens = {700, 0, 1, 130, 333};
    s.pad_tokens = 5;
    r.push_back({"layer_options_uneven_varlen", s});
  }
  r.push_back({"varlen_edges_i64_mixed_decay", varlen_edges_spec(dt, bt, op)});
  r.push_back({"varlen_strong_extreme_no_h0_gva3", varlen_strong_spec(dt, bt, op)});
  if (op == ChunkOp::kGdn) {
    ChunkAttnSpec s = fwd_base_spec(dt, bt, op);
    s.V = 64;
    s.B = 2;
    s.T = 400;
    s.opt.scale = 0.2;
    r.push_back({"dense_v64", s});
  } else {
    ChunkAttnSpec s = layer_options_spec(dt, bt, op);
    s.opt.has_lower_bound = true;
    s.opt.lower_bound = -5.0;
    s.opt.safe_gate = true;
    s.has_A_log = false;
    s.seqlens = {450, 3, 260};
    r.push_back({"kda_lower_bound", s});
  }
  if (sanitized()) r.resize(1);
  return r;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.defined() == b.defined() &&
         (!a.defined() || std::memcmp(a.data<char>(), b.data<char>(), a.view().nbytes()) == 0);
}

// Tier 1 and the reference once per case, then tier 3 at every (segments, vs).
void run_tier3_case(FwdCase c, const std::vector<int>& segment_counts, const std::vector<int>& slices) {
  SCOPED_TRACE(c.name);
  c.spec.opt.segments = 1;
  const ChunkAttnData d1 = make_chunk_attn(c.spec);
  const ChunkAttnOutTensors tier1 = run_cuda_fwd(d1, api::CudaGdnPath::kChunked, 0);
  const ChunkAttnOutTensors ref = ref_forward(d1);
  for (int segments : segment_counts)
    for (int vs : slices) {
      SCOPED_TRACE("segments=" + std::to_string(segments) + " vs=" + std::to_string(vs));
      ChunkAttnData d = d1;  // the same inputs, tier 3 requested
      d.spec.opt.segments = segments;
      const ChunkAttnOutTensors got = run_cuda_fwd(d, api::CudaGdnPath::kChunked, vs);
      EXPECT_TRUE(fwd_close(d, ref, got, c.spec.dtype)) << "tier 3 vs the fp64 reference";
      EXPECT_TRUE(fwd_close(d, tier1, got, c.spec.dtype)) << "tier 3 vs tier 1";
      EXPECT_TRUE(all_finite(d, got));
      check_padding_untouched(d, got);
      const ChunkAttnOutTensors again = run_cuda_fwd(d, api::CudaGdnPath::kChunked, vs);
      EXPECT_TRUE(same_bits(got.o, again.o) && same_bits(got.final_state, again.final_state))
          << "tier 3 is not deterministic";
    }
}

class CudaTier3Fwd : public ::testing::TestWithParam<std::tuple<DType, int>> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  }
};

TEST_P(CudaTier3Fwd, GdnMatchesReferenceAndTier1) {
  const auto [dt, bt] = GetParam();
  for (const FwdCase& c : cases(dt, bt, ChunkOp::kGdn)) run_tier3_case(c, {2, 3, 8}, {0});
}

TEST_P(CudaTier3Fwd, KdaMatchesReferenceAndTier1) {
  const auto [dt, bt] = GetParam();
  for (const FwdCase& c : cases(dt, bt, ChunkOp::kKda)) run_tier3_case(c, {2, 3, 8}, {0});
}

TEST_P(CudaTier3Fwd, EveryVSlice) {
  const auto [dt, bt] = GetParam();
  run_tier3_case(cases(dt, bt, ChunkOp::kGdn)[0], {3}, {32, 64, 128});
}

// The state pass on each kernel, forced; with the wgmma one (BT 64: eligible) it must really run:
// a tier-3 call then launches the wgmma kernels more often than with the state pass on mma.sync.
class CudaTier3SegKernel : public ::testing::TestWithParam<std::tuple<DType, int, const char*>> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
    setenv("LINATTN_CUDA_SEG_WGMMA", std::get<2>(GetParam()), 1);
  }
  void TearDown() override { unsetenv("LINATTN_CUDA_SEG_WGMMA"); }
};

int64_t wg_launches_of_tier3(const ChunkAttnData& d1, int segments) {
  ChunkAttnData d = d1;
  d.spec.opt.segments = segments;
  const int64_t before = cuda::gdn_fused_wg_launches();
  run_cuda_fwd(d, api::CudaGdnPath::kChunked, 0);
  return cuda::gdn_fused_wg_launches() - before;
}

TEST_P(CudaTier3SegKernel, GdnAndKdaMatchReferenceAndTier1) {
  const auto [dt, bt, sw] = GetParam();
  for (ChunkOp op : {ChunkOp::kGdn, ChunkOp::kKda})
    for (const FwdCase& c : cases(dt, bt, op)) run_tier3_case(c, {2, 3, 8}, {0});
  if (bt != 64) return;
  for (ChunkOp op : {ChunkOp::kGdn, ChunkOp::kKda}) {
    ChunkAttnSpec spec = cases(dt, bt, op)[0].spec;
    spec.opt.segments = 1;
    const ChunkAttnData d1 = make_chunk_attn(spec);
    const int64_t on = wg_launches_of_tier3(d1, 3);
    setenv("LINATTN_CUDA_SEG_WGMMA", "0", 1);
    const int64_t off = wg_launches_of_tier3(d1, 3);
    setenv("LINATTN_CUDA_SEG_WGMMA", sw, 1);
    if (std::string(sw) == "1") EXPECT_EQ(on, off + 1) << "the state pass did not run on the wgmma kernel";
    else EXPECT_EQ(on, off);
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaTier3SegKernel,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16), ::testing::Values(64, 32),
                                            ::testing::Values("0", "1")),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_bt" +
                                  std::to_string(std::get<1>(info.param)) + "_seg" + std::get<2>(info.param);
                         });

// The state pass on tma3's rings (LINATTN_CUDA_SEG_CHAIN=tma3, the default since d3f84ad; GDN at BT 64 takes it, checked to run)
// against the cp.async one (v3): bitwise. The tensor-core combines (LINATTN_CUDA_SEG_COMBINE=tc / tc8, checked to run):
// another summation order (3xTF32 products, ~fp32 rounding), so not bitwise the default: the reference bars, tier 1
// and the default tier 3 at the same bars, deterministic.
class CudaTier3SegVariants : public ::testing::TestWithParam<std::tuple<DType, int>> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  }
};

TEST_P(CudaTier3SegVariants, BitwiseOrCloseToDefaultAndReference) {
  const auto [dt, bt] = GetParam();
  struct Variant {
    const char *chain, *combine;
  };
  const Variant variants[] = {{"tma3", "ring2"}, {"tma3", "auto"}, {"tma3", "tc"}, {"tma3", "tc8"}, {"v3", "tc"}};
  for (ChunkOp op : {ChunkOp::kGdn, ChunkOp::kKda})
    for (const FwdCase& c : cases(dt, bt, op)) {
      SCOPED_TRACE(c.name);
      ChunkAttnSpec spec = c.spec;
      spec.opt.segments = 1;
      const ChunkAttnData d1 = make_chunk_attn(spec);
      const ChunkAttnOutTensors ref = ref_forward(d1);
      const ChunkAttnOutTensors tier1 = run_cuda_fwd(d1, api::CudaGdnPath::kChunked, 0);
      for (int segments : {2, 3, 8}) {
        SCOPED_TRACE("segments=" + std::to_string(segments));
        ChunkAttnData d = d1;
        d.spec.opt.segments = segments;
        ChunkAttnOutTensors def;
        {
          ScopedEnv a("LINATTN_CUDA_SEG_CHAIN", "v3"), b("LINATTN_CUDA_SEG_COMBINE", "ring2");
          def = run_cuda_fwd(d, api::CudaGdnPath::kChunked, 0);
        }
        for (const Variant& v : variants) {
          SCOPED_TRACE(std::string(v.chain) + " " + v.combine);
          ScopedEnv a("LINATTN_CUDA_SEG_CHAIN", v.chain), b("LINATTN_CUDA_SEG_COMBINE", v.combine);
          const bool tc = std::string(v.combine) != "ring2";
          const int64_t tma0 = cuda::gdn_fused_wgp_seg_tma_launches(), tc0 = cuda::seg::seg_combine_tc_launches();
          const ChunkAttnOutTensors got = run_cuda_fwd(d, api::CudaGdnPath::kChunked, 0);
          const bool tma = std::string(v.chain) == "tma3" && op == ChunkOp::kGdn && bt == 64;
          EXPECT_EQ(cuda::gdn_fused_wgp_seg_tma_launches() - tma0, tma ? 1 : 0) << "tma3 state pass launches";
          EXPECT_EQ(cuda::seg::seg_combine_tc_launches() - tc0, tc ? 1 : 0) << "tc combine launches";
          EXPECT_TRUE(fwd_close(d, ref, got, c.spec.dtype)) << "variant vs the fp64 reference";
          EXPECT_TRUE(all_finite(d, got));
          check_padding_untouched(d, got);
          if (!tc) {
            EXPECT_TRUE(same_bits(got.o, def.o) && same_bits(got.final_state, def.final_state))
                << "variant not bitwise equal to the default tier 3";
            continue;
          }
          EXPECT_TRUE(fwd_close(d, tier1, got, c.spec.dtype)) << "tc combine vs tier 1";
          EXPECT_TRUE(fwd_close(d, def, got, c.spec.dtype)) << "tc combine vs the default tier 3";
          const ChunkAttnOutTensors again = run_cuda_fwd(d, api::CudaGdnPath::kChunked, 0);
          EXPECT_TRUE(same_bits(got.o, again.o) && same_bits(got.final_state, again.final_state))
              << "tc combine is not deterministic";
        }
      }
    }
}

// LINATTN_CUDA_SEG_COMBINE: the removed variants (ring3, blk, blk3) and unknown values are errors naming the
// variable, the value and the accepted values; auto / unset, ring2, tc and tc8 pick their combines.
TEST(CudaTier3SegCombineSwitch, RemovedValuesAreErrors) {
  for (const char* bad : {"ring3", "blk", "blk3", "tc4", "RING2"}) {
    ScopedEnv e("LINATTN_CUDA_SEG_COMBINE", bad);
    try {
      cuda::seg::seg_combine_mode();
      ADD_FAILURE() << "LINATTN_CUDA_SEG_COMBINE=" << bad << " accepted";
    } catch (const Error& err) {
      const std::string what = err.what();
      EXPECT_NE(what.find(std::string("LINATTN_CUDA_SEG_COMBINE=") + bad), std::string::npos) << what;
      EXPECT_NE(what.find("expected auto"), std::string::npos) << what;
      EXPECT_NE(what.find("ring2, tc or tc8"), std::string::npos) << what;
    }
  }
  const std::pair<const char*, int> good[] = {{"ring2", 0}, {nullptr, 3}, {"auto", 3}, {"tc", 1}, {"tc8", 2}};
  for (const auto& [value, mode] : good) {
    ScopedEnv e("LINATTN_CUDA_SEG_COMBINE", value);
    EXPECT_EQ(cuda::seg::seg_combine_mode(), mode) << (value ? value : "(unset)");
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaTier3SegVariants,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16), ::testing::Values(64, 32)),
                         dtype_bt_name);

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaTier3Fwd,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16), ::testing::Values(64, 32)),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_bt" +
                                  std::to_string(std::get<1>(info.param));
                         });

// One sequence each (the schedule's condition): varlen with padding, dense B = 1, strong decays with
// -1000 gates, a sequence shorter than the slots (empty trailing slots), 1 and 0 tokens, KDA.
std::vector<FwdCase> first_cases(DType dt, int bt) {
  std::vector<FwdCase> r;
  {
    ChunkAttnSpec s = layer_options_spec(dt, bt, ChunkOp::kGdn);
    s.seqlens = {1000};
    s.pad_tokens = 5;
    r.push_back({"one_seq_layer_options", s});
  }
  {
    ChunkAttnSpec s = fwd_base_spec(dt, bt, ChunkOp::kGdn);
    s.B = 1;
    s.T = 700;
    s.V = 64;
    s.has_h0 = false;
    s.opt.scale = 0.2;
    r.push_back({"dense_b1_v64_no_h0", s});
  }
  {
    ChunkAttnSpec s = varlen_strong_spec(dt, bt, ChunkOp::kGdn);
    s.seqlens = {600};
    s.pad_tokens = 3;
    r.push_back({"one_seq_strong_extreme_gva3", s});
  }
  {
    ChunkAttnSpec s = layer_options_spec(dt, bt, ChunkOp::kGdn);
    s.seqlens = {130};
    s.cu_dtype = DType::kI64;
    r.push_back({"short_one_seq_i64", s});
  }
  {
    ChunkAttnSpec s = layer_options_spec(dt, bt, ChunkOp::kGdn);
    s.seqlens = {1};
    s.pad_tokens = 2;
    r.push_back({"one_token", s});
  }
  {
    ChunkAttnSpec s = layer_options_spec(dt, bt, ChunkOp::kGdn);
    s.seqlens = {0};
    s.pad_tokens = 4;
    r.push_back({"zero_tokens_h0", s});
  }
  {
    ChunkAttnSpec s = layer_options_spec(dt, bt, ChunkOp::kKda);
    s.seqlens = {900};
    s.pad_tokens = 1;
    r.push_back({"kda_one_seq", s});
  }
  if (sanitized()) r.resize(1);
  return r;
}

class CudaTier3First : public ::testing::TestWithParam<std::tuple<DType, int>> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  }
};

TEST_P(CudaTier3First, MatchesReferenceTier1AndDefaultSchedule) {
  const auto [dt, bt] = GetParam();
  const std::vector<int> segment_counts = sanitized() ? std::vector<int>{3} : std::vector<int>{2, 3, 9};
  for (const FwdCase& c : first_cases(dt, bt)) {
    SCOPED_TRACE(c.name);
    ChunkAttnSpec spec = c.spec;
    spec.opt.segments = 1;
    const ChunkAttnData d1 = make_chunk_attn(spec);
    const ChunkAttnOutTensors tier1 = run_cuda_fwd(d1, api::CudaGdnPath::kChunked, 0);
    const ChunkAttnOutTensors ref = ref_forward(d1);
    for (int segments : segment_counts) {
      SCOPED_TRACE("segments=" + std::to_string(segments));
      ChunkAttnData d = d1;
      d.spec.opt.segments = segments;
      ChunkAttnOutTensors def, got, again;
      {
        ScopedEnv off("LINATTN_CUDA_TIER3_FIRST", "0");
        const int64_t before = cuda::seg::tier3_first_runs();
        def = run_cuda_fwd(d, api::CudaGdnPath::kChunked, 0);
        EXPECT_EQ(cuda::seg::tier3_first_runs(), before) << "the first-segment schedule ran while switched off";
      }
      {
        ScopedEnv on("LINATTN_CUDA_TIER3_FIRST", "1");
        const int64_t before = cuda::seg::tier3_first_runs();
        got = run_cuda_fwd(d, api::CudaGdnPath::kChunked, 0);
        again = run_cuda_fwd(d, api::CudaGdnPath::kChunked, 0);
        EXPECT_EQ(cuda::seg::tier3_first_runs(), before + 2) << "the first-segment schedule did not run";
      }
      EXPECT_TRUE(fwd_close(d, ref, got, c.spec.dtype)) << "first-segment schedule vs the fp64 reference";
      EXPECT_TRUE(fwd_close(d, tier1, got, c.spec.dtype)) << "first-segment schedule vs tier 1";
      EXPECT_TRUE(fwd_close(d, def, got, c.spec.dtype)) << "first-segment schedule vs the default schedule";
      EXPECT_TRUE(all_finite(d, got));
      check_padding_untouched(d, got);
      EXPECT_TRUE(same_bits(got.o, again.o) && same_bits(got.final_state, again.final_state))
          << "the first-segment schedule is not deterministic";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaTier3First,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16), ::testing::Values(64, 32)),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_bt" +
                                  std::to_string(std::get<1>(info.param));
                         });

// New inputs (and NaN outputs) into dev's buffers: every layout has the same shapes.
void refill(DevChunkAttn& dev, const ChunkAttnData& d, cudaStream_t stream) {
  const ChunkAttnOutTensors nan = alloc_outputs(d, d.spec.dtype, DType::kF32);
  const std::pair<TensorView*, const Tensor*> pairs[] = {
      {&dev.in.q, &d.q},           {&dev.in.k, &d.k},
      {&dev.in.v, &d.v},           {&dev.in.g, &d.g},
      {&dev.in.beta, &d.beta},     {&dev.in.A_log, &d.A_log},
      {&dev.in.dt_bias, &d.dt_bias}, {&dev.in.initial_state, &d.initial_state},
      {&dev.in.cu_seqlens, &d.cu_seqlens}, {&dev.out.o, &nan.o},
      {&dev.out.final_state, &nan.final_state}};
  for (auto [dst, src] : pairs)
    if (dst->defined() && src->defined()) copy_tensor(*dst, src->view(), ExecContext{stream});
  CUDA_OK(cudaStreamSynchronize(stream));
}

// One sequence of capacity T_max (max_num_seqs 1): eager warm-up, one capture of the forward with
// the schedule on (`first`), then replays on new lengths (T_max, shorter, 1, 0, ...) with NaN padding rows and
// NaN outputs; each replay equals an eager fixed-capacity call bitwise and matches the reference. `pdl`: the
// warm-up and the capture with LINATTN_CUDA_PDL=1, the eager calls without.
void run_first_graph(ChunkOp op, DType dt, int bt, int segments, bool first = true, bool pdl = false) {
  SCOPED_TRACE(std::string(op == ChunkOp::kKda ? "kda " : "gdn ") + dtype_name(dt) + " bt=" + std::to_string(bt) +
               " segments=" + std::to_string(segments) + (first ? " first" : "") + (pdl ? " pdl" : ""));
  ScopedEnv on("LINATTN_CUDA_TIER3_FIRST", first ? "1" : "0");
  constexpr int64_t kT = 1100;
  std::vector<int64_t> lens = {1100, 700, 1, 0, 333, 64, 1100};
  if (sanitized()) lens.resize(2);
  ChunkAttnSpec spec = layer_options_spec(dt, bt, op);
  spec.opt.use_graph = true;
  spec.opt.max_num_seqs = 1;
  spec.opt.segments = segments;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    cuda::CudaGraph graph(stream);
    std::unique_ptr<DevChunkAttn> st, eager;
    TensorView ws_st, ws_eager;
    for (size_t idx = 0; idx < lens.size(); ++idx) {
      SCOPED_TRACE("layout " + std::to_string(idx) + " length " + std::to_string(lens[idx]));
      spec.seqlens = {lens[idx]};
      spec.pad_tokens = kT - lens[idx];
      spec.seed = 50 + idx;
      const ChunkAttnData d = make_chunk_attn(spec);
      const ChunkAttnOutTensors ref = ref_forward(d);
      if (idx == 0) {
        st = to_device(d);
        eager = to_device(d);
        const size_t bytes = chunk_attn_fwd_workspace_bytes(st->in, d.opt());
        ws_st = st->arena.alloc(DType::kI32, {static_cast<int64_t>(bytes / 4 + 1)});
        ws_eager = eager->arena.alloc(DType::kI32, {static_cast<int64_t>(bytes / 4 + 1)});
        ScopedEnv p("LINATTN_CUDA_PDL", pdl ? "1" : "0");
        chunk_attn_fwd(st->in, st->out, d.opt(), ExecContext{stream, ws_st.data, ws_st.nbytes()});  // warm-up
        CUDA_OK(cudaStreamSynchronize(stream));
        const int64_t before = cuda::seg::tier3_first_runs(), pdl0 = cuda::pdl_launches();
        graph.begin();
        chunk_attn_fwd(st->in, st->out, d.opt(), ExecContext{stream, ws_st.data, ws_st.nbytes()});
        graph.end();
        EXPECT_EQ(cuda::seg::tier3_first_runs(), before + (first ? 1 : 0)) << "the captured forward's schedule";
        if (pdl) {
          EXPECT_GE(cuda::pdl_launches() - pdl0, 2) << "the captured forward launched nothing with PDL";
        }
      }
      refill(*st, d, stream);
      graph.replay();
      CUDA_OK(cudaStreamSynchronize(stream));
      const ChunkAttnOutTensors got = outputs_to_host(*st);
      refill(*eager, d, stream);
      ScopedEnv plain("LINATTN_CUDA_PDL", "0");
      chunk_attn_fwd(eager->in, eager->out, d.opt(), ExecContext{stream, ws_eager.data, ws_eager.nbytes()});
      CUDA_OK(cudaStreamSynchronize(stream));
      const ChunkAttnOutTensors want = outputs_to_host(*eager);
      EXPECT_TRUE(same_bits(got.o, want.o)) << "graph replay o differs from eager fixed";
      EXPECT_TRUE(same_bits(got.final_state, want.final_state)) << "graph replay final state differs from eager fixed";
      EXPECT_TRUE(fwd_close(d, ref, got, dt));
      EXPECT_TRUE(all_finite(d, got));
      check_padding_untouched(d, got);
    }
  }
  cudaStreamDestroy(stream);
}

TEST(CudaTier3FirstGraph, ReplayNewLengthsEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  run_first_graph(ChunkOp::kGdn, DType::kBF16, 64, 9);
  if (sanitized()) return;
  run_first_graph(ChunkOp::kKda, DType::kF16, 32, 3);
  run_first_graph(ChunkOp::kGdn, DType::kF16, 64, 2);
}

// PDL (LINATTN_CUDA_PDL=1): the tier-3 forward's chain (table, chunk tables, prep, state pass, combine, pass 2,
// gather) launched with programmatic dependencies runs the same kernels in the same order: bitwise the plain
// launches (GDN cases, segments 2 / 3 / 8, BT 64; checked to launch with PDL).
class CudaTier3Pdl : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  }
};

TEST_P(CudaTier3Pdl, EagerBitwisePlainLaunches) {
  const DType dt = GetParam();
  for (const FwdCase& c : cases(dt, 64, ChunkOp::kGdn)) {
    SCOPED_TRACE(c.name);
    const ChunkAttnData d1 = make_chunk_attn(c.spec);
    for (int segments : {2, 3, 8}) {
      SCOPED_TRACE("segments=" + std::to_string(segments));
      ChunkAttnData d = d1;
      d.spec.opt.segments = segments;
      ChunkAttnOutTensors off, on;
      {
        ScopedEnv e("LINATTN_CUDA_PDL", "0");
        const int64_t n0 = cuda::pdl_launches();
        off = run_cuda_fwd(d, api::CudaGdnPath::kChunked, 0);
        EXPECT_EQ(cuda::pdl_launches(), n0) << "PDL launches while switched off";
      }
      {
        ScopedEnv e("LINATTN_CUDA_PDL", "1");
        const int64_t n0 = cuda::pdl_launches();
        on = run_cuda_fwd(d, api::CudaGdnPath::kChunked, 0);
        EXPECT_GE(cuda::pdl_launches() - n0, 2) << "no PDL launches while switched on";
      }
      EXPECT_TRUE(same_bits(on.o, off.o)) << "o with PDL differs from the plain launches";
      EXPECT_TRUE(same_bits(on.final_state, off.final_state)) << "final state with PDL differs";
      check_padding_untouched(d, on);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaTier3Pdl, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CudaTier3PdlGraph, ReplayNewLengthsEqualsEagerPlain) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  run_first_graph(ChunkOp::kGdn, DType::kBF16, 64, 8, false, true);
  if (sanitized()) return;
  run_first_graph(ChunkOp::kGdn, DType::kF16, 64, 3, false, true);
  run_first_graph(ChunkOp::kGdn, DType::kBF16, 64, 2, true, true);
  run_first_graph(ChunkOp::kGdn, DType::kF16, 64, 1, false, true);  // segments 1: the plain forward's chain
}

// The planner picks tier 3 on its own for few heads and a long sequence (segments = 0), and the
// result still matches the reference.
TEST(CudaTier3Plan, AutoPicksTier3ForFewHeads) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ChunkAttnSpec s = layer_options_spec(DType::kBF16, 64, ChunkOp::kGdn);
  s.H = s.HV = 1;
  s.B = 1;
  s.T = 4096;  // 64 chunks on one head: the model picks 8 segments
  const ChunkAttnData d = make_chunk_attn(s);
  {
    auto dev = to_device(d);
    std::string why;
    EXPECT_GT(api::chunk_attn_cuda_segments(meta::describe_chunk_attn(dev->in, d.opt()), dev->in, d.opt(), &why), 1)
        << why;
    ChunkAttnOptions off = d.opt();
    off.segments = 1;
    EXPECT_EQ(api::chunk_attn_cuda_segments(meta::describe_chunk_attn(dev->in, off), dev->in, off), 1);
  }
  const ChunkAttnOutTensors got = run_cuda_fwd(d, api::CudaGdnPath::kAuto, 0);
  EXPECT_TRUE(fwd_close(d, ref_forward(d), got, s.dtype));
  EXPECT_TRUE(all_finite(d, got));
}

}  // namespace
}  // namespace linattn::test

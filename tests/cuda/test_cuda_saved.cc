// The training cache (ChunkAttnOutputs::saved -> ChunkAttnInputs::saved) on CUDA, GDN and KDA, bf16 and
// fp16, BT 64 and 32, on seeded inputs: the layer options (GVA 2), varlen with edge lengths, padding and
// int64 cu_seqlens, strong / -1000 gates with a zero-length sequence (GVA 3), and the KDA backward cases
// (lower_bound -5, safe gate). For each: chunk_attn_saved_bytes > 0; the forward's outputs with a cache
// equal those without bitwise; the backward reading the cache gives bitwise the gradients of the
// backward that recomputes its prep, and they match the fp64 reference; its workspace query is smaller
// with the cache. Errors: a short or misaligned cache is an address-or-lifetime error naming `saved`
// (forward and backward); a tier-3 or token-path call reports 0 bytes and ignores the cache.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>

#include "common/compare.h"
#include "cuda_bwd_util.h"
#include "cuda_fwd_util.h"
#include "linattn/error.h"

namespace linattn::test {
namespace {

struct SavedCase {
  std::string name;
  ChunkAttnSpec spec;
};

std::vector<SavedCase> saved_cases(DType dt, int bt) {
  std::vector<SavedCase> r;
  for (ChunkOp op : {ChunkOp::kGdn, ChunkOp::kKda}) {
    const std::string tag = op == ChunkOp::kKda ? "kda_" : "gdn_";
    r.push_back({tag + "layer_options_gva2", layer_options_spec(dt, bt, op)});
    r.push_back({tag + "varlen_edges", varlen_edges_spec(dt, bt, op)});
    r.push_back({tag + "varlen_strong_gva3", varlen_strong_spec(dt, bt, op)});
  }
  for (const BwdCase& c : kda_bwd_cases(dt, bt)) r.push_back({"kda_" + c.name, c.spec});
  return r;
}

// A device buffer of `bytes` (256-B aligned: cudaMalloc'd).
TensorView cache_buffer(DevArena& a, size_t bytes) {
  return a.alloc(DType::kI32, {static_cast<int64_t>(bytes / 4 + 1)});
}

struct FwdBwd {
  ChunkAttnOutTensors out;
  ChunkAttnGradTensors grads;
};

// Forward then backward through the public ops; with `cache`, the forward fills it and the backward
// reads it (its workspace sized by the query that knows about the cache).
FwdBwd fwd_bwd(const ChunkAttnData& d, const ChunkAttnCotangents& cot, const TensorView* cache) {
  auto dev = to_device(d);
  ChunkAttnOutputs out = dev->out;
  ChunkAttnInputs in = dev->in;
  if (cache) {
    out.saved = cache->data;
    out.saved_bytes = cache->nbytes();
    in.saved = cache->data;
    in.saved_bytes = cache->nbytes();
  }
  chunk_attn_fwd(dev->in, out, d.opt());
  auto g = grads_to_device(alloc_grads(d, DType::kF32, DType::kF32), cot);
  DevArena ws;
  const size_t wb = chunk_attn_bwd_workspace_bytes(in, d.opt());
  const TensorView w = cache_buffer(ws, wb);
  chunk_attn_bwd(in, g->d_o, g->dht, g->g, d.opt(), ExecContext{nullptr, w.data, wb});
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return {outputs_to_host(*dev), grads_to_host(g->g)};
}

class CudaSaved : public ::testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(CudaSaved, CacheGivesBitwiseTheRecomputedGradients) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: this test runs on a GPU machine (scripts/gpu-final)";
  const auto [dt, bt] = GetParam();
  for (const SavedCase& c : saved_cases(dt, bt)) {
    SCOPED_TRACE(c.name);
    const ChunkAttnData d = make_chunk_attn(c.spec);
    Rng rng(17);
    const ChunkAttnCotangents cot = random_cotangents(d, rng, dt, true);
    auto dev = to_device(d);
    const size_t bytes = chunk_attn_saved_bytes(dev->in, d.opt());
    ASSERT_GT(bytes, 0u) << "the chunked CUDA path should take a training cache";
    ChunkAttnInputs in_cached = dev->in;
    DevArena a;
    const TensorView cache = cache_buffer(a, bytes);
    in_cached.saved = cache.data;
    in_cached.saved_bytes = bytes;
    EXPECT_LT(chunk_attn_bwd_workspace_bytes(in_cached, d.opt()), chunk_attn_bwd_workspace_bytes(dev->in, d.opt()));
    const FwdBwd plain = fwd_bwd(d, cot, nullptr);
    const FwdBwd cached = fwd_bwd(d, cot, &cache);
    EXPECT_TRUE(same_bits(plain.out.o, cached.out.o)) << "o differs with a cache";
    EXPECT_TRUE(same_bits(plain.out.final_state, cached.out.final_state)) << "final_state differs with a cache";
    EXPECT_TRUE(grads_bitwise(plain.grads, cached.grads));
    EXPECT_TRUE(bwd_close(d, ref_backward(d, cot), cached.grads, dt));
    EXPECT_TRUE(grads_padding_zero(d, cached.grads));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaSaved,
                         ::testing::Values(std::make_tuple(DType::kBF16, 64), std::make_tuple(DType::kF16, 64),
                                           std::make_tuple(DType::kBF16, 32)),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_bt" +
                                  std::to_string(std::get<1>(info.param));
                         });

void expect_saved_error(const std::function<void()>& fn, const char* what) {
  try {
    fn();
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), FailureCategory::kAddressOrLifetime) << what << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find("saved"), std::string::npos) << what << ": " << e.what();
  }
}

TEST(CudaSavedErrors, ShortOrMisalignedCacheIsRejected) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: this test runs on a GPU machine (scripts/gpu-final)";
  for (ChunkOp op : {ChunkOp::kGdn, ChunkOp::kKda}) {
    const ChunkAttnData d = make_chunk_attn(varlen_edges_spec(DType::kBF16, 64, op));
    Rng rng(5);
    const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kBF16, true);
    auto dev = to_device(d);
    const size_t bytes = chunk_attn_saved_bytes(dev->in, d.opt());
    ASSERT_GT(bytes, 0u);
    DevArena a;
    const TensorView cache = cache_buffer(a, bytes + 512);
    auto g = grads_to_device(alloc_grads(d, DType::kF32, DType::kF32), cot);
    for (auto [ptr, n, what] : {std::make_tuple(cache.data, bytes - 256, "short cache"),
                                std::make_tuple(static_cast<void*>(static_cast<char*>(cache.data) + 16), bytes,
                                                "misaligned cache")}) {
      ChunkAttnOutputs out = dev->out;
      out.saved = ptr;
      out.saved_bytes = n;
      expect_saved_error([&] { chunk_attn_fwd(dev->in, out, d.opt()); }, what);
      ChunkAttnInputs in = dev->in;
      in.saved = ptr;
      in.saved_bytes = n;
      expect_saved_error([&] { chunk_attn_bwd(in, g->d_o, g->dht, g->g, d.opt()); }, what);
    }
  }
}

TEST(CudaSavedErrors, TierThreeAndTokenShapesTakeNoCache) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: this test runs on a GPU machine (scripts/gpu-final)";
  ChunkAttnSpec s = fwd_base_spec(DType::kBF16, 64);
  s.opt.segments = 4;  // tier 3 forced
  s.B = 1;
  s.T = 700;
  const ChunkAttnData d = make_chunk_attn(s);
  auto dev = to_device(d);
  EXPECT_EQ(chunk_attn_saved_bytes(dev->in, d.opt()), 0u);
  ChunkAttnSpec f = fwd_base_spec(DType::kF32, 64);  // fp32 inputs: the token-by-token kernels
  const ChunkAttnData df = make_chunk_attn(f);
  auto devf = to_device(df);
  EXPECT_EQ(chunk_attn_saved_bytes(devf->in, df.opt()), 0u);
  // A cache given where none is used is ignored: the gradients equal those without one.
  Rng rng(8);
  const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kBF16, true);
  DevArena a;
  const TensorView junk = cache_buffer(a, 4096);
  const FwdBwd plain = fwd_bwd(d, cot, nullptr);
  const FwdBwd with = fwd_bwd(d, cot, &junk);
  EXPECT_TRUE(grads_bitwise(plain.grads, with.grads));
}

}  // namespace
}  // namespace linattn::test

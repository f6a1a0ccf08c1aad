// Dense helper ops on CUDA (label gpu): cuBLAS GEMM (fp32, bf16 with bf16 or fp32 output, every
// transpose, alpha/beta) against an fp64 product of the same (rounded) inputs; gated RMSNorm
// forward and backward against the CPU op on the same inputs (which tests/dense/test_dense.cc
// checks against fp64), deterministic dw; padding-row zeroing read at replay time inside a CUDA
// graph; dtype conversion; capture on an unprepared stream raising [address-or-lifetime]; copy_tensors'
// batched kernel (eager and replayed in a graph).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "linattn/dense.h"
#include "linattn/error.h"
#include "linattn/graph.h"

namespace linattn {
namespace {

const Device kGpu{DeviceType::kCUDA, 0};

Tensor randn(std::vector<int64_t> shape, uint64_t seed, DType dt = DType::kF32) {
  std::mt19937_64 rng(seed);
  Tensor t(DType::kF64, shape);
  std::normal_distribution<double> nd(0.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, nd(rng));
  return t.to(dt);
}

// A device copy of a host tensor (owning).
struct Dev {
  Buffer buf;
  TensorView v;
  explicit Dev(const Tensor& h, const ExecContext& ctx = {}) : buf(kGpu, std::max<size_t>(h.view().nbytes(), 1)) {
    v = TensorView::contiguous(buf.data(), h.dtype(), h.shape(), kGpu);
    copy_tensor(v, h.view(), ctx);
    // The copy is asynchronous on ctx's stream (default: the legacy stream), which the tests'
    // non-blocking compute streams do not wait for: finish it before anything reads v.
    stream_synchronize(kGpu, ctx);
  }
  Tensor host() const {
    Tensor h(v.dtype, std::vector<int64_t>(v.shape.begin(), v.shape.begin() + v.ndim));
    copy_tensor(h.view(), v);
    cudaDeviceSynchronize();
    return h;
  }
};

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }
  ~Stream() { cudaStreamDestroy(s); }
  ExecContext ctx() const {
    ExecContext c;
    c.stream = s;
    return c;
  }
};

TEST(DenseCuda, GemmMatchesFp64EveryTransposeAndDtype) {
  const int64_t M = 67, N = 45, K = 129;
  Stream st;
  const struct { DType ab, c; double tol; } cases[] = {
      {DType::kF32, DType::kF32, 2e-5}, {DType::kBF16, DType::kF32, 2e-5}, {DType::kBF16, DType::kBF16, 8e-3},
      {DType::kF16, DType::kF16, 2e-3}};
  int seed = 1;
  for (const auto& cs : cases)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        Tensor a = randn(ta ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K}, seed++, cs.ab);
        Tensor b = randn(tb ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N}, seed++, cs.ab);
        Tensor c = randn({M, N}, seed++, cs.c);
        Dev da(a, st.ctx()), db(b, st.ctx()), dc(c, st.ctx());
        dense_prepare(kGpu, st.ctx());
        gemm(da.v, ta, db.v, tb, dc.v, 0.5f, 2.0f, st.ctx());
        cudaStreamSynchronize(st.s);
        Tensor got = dc.host();
        double worst = 0, scale = 0;
        int64_t wi = 0;
        double wref = 0;
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k) s += a.get(ta ? k * M + i : i * K + k) * b.get(tb ? j * K + k : k * N + j);
            const double ref = 0.5 * s + 2.0 * c.get(i * N + j);
            scale = std::max(scale, std::fabs(ref));
            const double e = std::fabs(ref - got.get(i * N + j));
            if (e > worst) worst = e, wi = i * N + j, wref = ref;
          }
        EXPECT_LT(worst / scale, cs.tol) << dtype_name(cs.ab) << "->" << dtype_name(cs.c) << " ta=" << ta
                                         << " tb=" << tb << " worst at " << wi << ": got " << got.get(wi)
                                         << " ref " << wref;
      }
}

TEST(DenseCuda, GemmEmptyAndRejects) {
  Stream st;
  Tensor a = randn({5, 0}, 1), b = randn({0, 3}, 2), c = randn({5, 3}, 3);
  Dev da(a), db(b), dc(c);
  gemm(da.v, false, db.v, false, dc.v, 1.0f, 0.0f, st.ctx());  // K = 0, beta = 0: c = 0
  cudaStreamSynchronize(st.s);
  Tensor got = dc.host();
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(got.get(i), 0.0) << i;
  Tensor a2 = randn({4, 4}, 4, DType::kBF16), b2 = randn({4, 4}, 5);
  Dev da2(a2), db2(b2), dc2(randn({4, 4}, 6));
  EXPECT_THROW(gemm(da2.v, false, db2.v, false, dc2.v, 1.0f, 0.0f, st.ctx()), Error);  // mixed a/b dtypes
}

void norm_case(DType dt, int64_t R, int64_t D, bool sig, int64_t valid, uint64_t seed) {
  Stream st;
  Tensor x = randn({R, D}, seed, dt), g = randn({R, D}, seed + 1, dt), dy = randn({R, D}, seed + 2, dt);
  Tensor w = randn({D}, seed + 3);
  const NormGate act = sig ? NormGate::kSigmoid : NormGate::kSilu;
  // CPU op on the same inputs.
  Tensor y(dt, {R, D}), rstd(DType::kF32, {R}), dx(dt, {R, D}), dg(dt, {R, D}), dw(DType::kF32, {D});
  rms_norm_gated_fwd(x, g, w, y, rstd, act, 1e-5f);
  rms_norm_gated_bwd(x, g, w, dy, dx, dg, dw, act, 1e-5f, valid);
  Dev X(x), G(g), DY(dy), W(w), Y(Tensor(dt, {R, D})), RS(Tensor(DType::kF32, {R})), DX(Tensor(dt, {R, D})),
      DG(Tensor(dt, {R, D})), DW(Tensor(DType::kF32, {D})), DW2(Tensor(DType::kF32, {D}));
  rms_norm_gated_fwd(X.v, G.v, W.v, Y.v, RS.v, act, 1e-5f, st.ctx());
  rms_norm_gated_bwd(X.v, G.v, W.v, DY.v, DX.v, DG.v, DW.v, act, 1e-5f, valid, st.ctx());
  rms_norm_gated_bwd(X.v, G.v, W.v, DY.v, DX.v, DG.v, DW2.v, act, 1e-5f, valid, st.ctx());
  cudaStreamSynchronize(st.s);
  const double tol = dt == DType::kF32 ? 1e-5 : dt == DType::kBF16 ? 1.6e-2 : 2e-3;
  const std::string where = std::string(dtype_name(dt)) + " R=" + std::to_string(R) + " D=" + std::to_string(D) +
                            (sig ? " sigmoid" : " silu") + " valid=" + std::to_string(valid);
  auto cmp = [&](const char* name, const Tensor& got, const Tensor& ref, double t) {
    double worst = 0, scale = 1e-30;
    int64_t wi = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      scale = std::max(scale, std::fabs(ref.get(i)));
      const double e = std::fabs(got.get(i) - ref.get(i));
      if (e > worst || std::isnan(e)) worst = std::isnan(e) ? 1e30 : e, wi = i;
    }
    EXPECT_LE(worst / scale, t) << where << " " << name << " worst at " << wi << ": got " << got.get(wi) << " cpu "
                                << ref.get(wi);
  };
  cmp("y", Y.host(), y, tol);
  cmp("rstd", RS.host(), rstd, 1e-5);
  cmp("dx", DX.host(), dx, tol);
  cmp("dg", DG.host(), dg, tol);
  cmp("dw", DW.host(), dw, 1e-4);
  Tensor a = DW.host(), b = DW2.host();
  EXPECT_EQ(std::memcmp(a.view().data, b.view().data, a.view().nbytes()), 0) << where << " dw not deterministic";
  Tensor dxh = DX.host();
  for (int64_t i = (valid < 0 ? R : valid) * D; i < R * D; ++i) ASSERT_EQ(dxh.get(i), 0.0) << where << " padding dx";
}

TEST(DenseCuda, RmsNormGatedMatchesCpu) {
  norm_case(DType::kF32, 300, 128, false, -1, 11);
  norm_case(DType::kF32, 300, 100, true, 250, 12);
  norm_case(DType::kBF16, 1000, 128, false, 900, 13);
  norm_case(DType::kBF16, 77, 1000, true, -1, 14);
  norm_case(DType::kF16, 129, 16, false, -1, 15);
  norm_case(DType::kF32, 5, 64, true, 0, 16);
}

TEST(DenseCuda, ConvertMatchesCpu) {
  Tensor x = randn({3, 1001}, 21);
  for (DType dt : {DType::kBF16, DType::kF16}) {
    Dev X(x), Y(Tensor(dt, {3, 1001})), Z(Tensor(DType::kF32, {3, 1001}));
    convert_tensor(Y.v, X.v);
    convert_tensor(Z.v, Y.v);
    Tensor ref = x.to(dt), got = Y.host(), back = Z.host();
    for (int64_t i = 0; i < x.numel(); ++i) {
      ASSERT_EQ(got.get(i), ref.get(i)) << dtype_name(dt) << " " << i;
      ASSERT_EQ(back.get(i), ref.get(i)) << dtype_name(dt) << " back " << i;
    }
  }
}

// zero_padding_rows reads cu_seqlens when the kernel runs: captured once, replayed with new values.
TEST(DenseCuda, ZeroPaddingRowsReadsCuAtReplay) {
  Stream st;
  const int64_t T = 40, Wd = 6;
  Tensor x = randn({1, T, Wd}, 31, DType::kBF16);
  Dev X(x, st.ctx());
  Tensor cu(DType::kI32, {3});
  cu.set(0, 0), cu.set(1, 5), cu.set(2, 12);
  Dev CU(cu, st.ctx());
  Graph graph(kGpu, st.s);
  graph.capture([&] { zero_padding_rows(X.v, CU.v, st.ctx()); });
  for (int end : {12, 40, 0, 33}) {
    copy_tensor(X.v, x.view(), st.ctx());
    cu.set(2, end);
    copy_tensor(CU.v, cu.view(), st.ctx());
    graph.replay();
    cudaStreamSynchronize(st.s);
    Tensor got = X.host();
    for (int64_t i = 0; i < T * Wd; ++i) ASSERT_EQ(got.get(i), i < end * Wd ? x.get(i) : 0.0) << "end " << end << " " << i;
  }
}

TEST(DenseCuda, CaptureOnUnpreparedStreamRaises) {
  Stream st;  // a fresh stream: no cuBLAS handle yet
  Dev a(randn({4, 4}, 41)), b(randn({4, 4}, 42)), c(randn({4, 4}, 43));
  Graph graph(kGpu, st.s);
  try {
    graph.capture([&] { gemm(a.v, false, b.v, false, c.v, 1.0f, 0.0f, st.ctx()); });
    FAIL() << "expected a capture violation";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCaptureViolation) << e.what();
    EXPECT_NE(e.message().find("dense_prepare"), std::string::npos) << e.what();
  }
  dense_prepare(kGpu, st.ctx());
  graph.capture([&] { gemm(a.v, false, b.v, false, c.v, 1.0f, 0.0f, st.ctx()); });
  graph.replay();
  EXPECT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
}

// copy_tensors on CUDA: 21 device pairs of assorted sizes (fp16: 0 bytes, 2..14-byte tails past the 16-byte words,
// 8 MiB; two kernel launches, 16 + 4 pairs), one over kCopyBatchMaxBytes (cudaMemcpyAsync), one pair at
// 2-byte-aligned addresses (the byte path), a host -> device pair (cudaMemcpyAsync after the kernels); then the device pairs captured once into a CUDA graph and replayed with
// new source data (the copies read the sources at replay): every byte equal to its source.
TEST(DenseCuda, CopyTensorsBatchedMatchesSourcesEagerAndInGraph) {
  Stream st;
  const std::vector<int64_t> elems = {(1 << 23) + 5, 0, 1, 7, 8, 9, 31, 4096, 4099, 65536, 12345, 7, 2, 3, 300000,
                                      33, 1 << 22, 5, 64, 1000, 999};
  std::vector<int64_t> sizes;  // bytes
  for (int64_t n : elems) sizes.push_back(2 * n);
  ASSERT_GT(sizes[0], static_cast<int64_t>(kCopyBatchMaxBytes));  // pair 0 takes cudaMemcpyAsync
  const int64_t total = [&] { int64_t t = 0; for (int64_t n : sizes) t += n + 128; return t; }();
  Buffer sbuf(kGpu, total), dbuf(kGpu, total);
  std::vector<TensorCopy> pairs;
  std::vector<std::vector<uint8_t>> want;
  int64_t off = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t skew = i == 5 ? 2 : 0;  // pair 5: dst and src 2 bytes past a 16-byte boundary (the byte path)
    auto* s = static_cast<uint8_t*>(sbuf.data()) + off + skew;
    auto* d = static_cast<uint8_t*>(dbuf.data()) + off + skew;
    pairs.push_back({TensorView::contiguous(d, DType::kF16, {elems[i]}, kGpu),
                     TensorView::contiguous(s, DType::kF16, {elems[i]}, kGpu)});
    off += (sizes[i] + skew + 63) / 64 * 64 + 64;
  }
  Tensor h_src(DType::kF32, {1000, 3});  // a host -> device pair
  Buffer hd(kGpu, h_src.view().nbytes());
  pairs.push_back({TensorView::contiguous(hd.data(), DType::kF32, {1000, 3}, kGpu), h_src.view()});
  auto fill = [&](uint64_t seed) {
    std::uniform_int_distribution<int> byte(0, 255);
    std::mt19937_64 r(seed);
    want.clear();
    for (size_t i = 0; i < sizes.size(); ++i) {
      want.emplace_back(sizes[i]);
      for (auto& x : want.back()) x = static_cast<uint8_t>(byte(r));
      if (sizes[i]) cudaMemcpy(const_cast<void*>(pairs[i].src.data), want.back().data(), sizes[i], cudaMemcpyHostToDevice);
    }
    for (int64_t i = 0; i < h_src.numel(); ++i) h_src.set(i, double(byte(r)) - 100.0);
  };
  auto check = [&](const char* what) {
    ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::vector<uint8_t> got(sizes[i]);
      if (sizes[i]) cudaMemcpy(got.data(), pairs[i].dst.data, sizes[i], cudaMemcpyDeviceToHost);
      ASSERT_EQ(got, want[i]) << what << ": pair " << i << " (" << sizes[i] << " bytes)";
    }
    Tensor got(DType::kF32, {1000, 3});
    cudaMemcpy(got.view().data, hd.data(), got.view().nbytes(), cudaMemcpyDeviceToHost);
    for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(got.get(i), h_src.get(i)) << what << ": host pair " << i;
  };
  fill(1);
  copy_tensors(pairs.data(), pairs.size(), st.ctx());
  check("eager");
  // the host pair stays outside the graph (pageable host memory): capture the 21 device pairs only
  Graph graph(kGpu, st.s);
  graph.capture([&] { copy_tensors(pairs.data(), sizes.size(), st.ctx()); });
  for (uint64_t seed : {2, 3}) {
    fill(seed);
    cudaMemcpy(hd.data(), h_src.view().data, h_src.view().nbytes(), cudaMemcpyHostToDevice);
    graph.replay();
    check("replay");
  }
}

}  // namespace
}  // namespace linattn

// CUDA short conv (label gpu): the same sweep as the CPU tests against the fp64 reference
// (every W, dtype, option, awkward lengths, dense / varlen, strided, the vectorized and the
// element-copy paths, several channel tiles and row groups), run-to-run bitwise determinism,
// and the fixed-capacity CUDA graph sequence: capture once, replay over six layouts with new
// inputs and garbage padding, replay == eager fixed-capacity call bitwise, padding untouched.
// Aligned layouts run the default dispatch (v6 long runs where the grid is large enough, v3 tiles
// elsewhere); scripts/gpu-conv / gpu-final rerun the binary with LINATTN_CONV_CUDA_PATH=run and =tiles
// so both designs cover every layout; the kept forward variants (x=cp, grids) are swept in-process,
// and the switches of the variants removed in session 10 must fail with a clear error.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "conv_case.h"
#include "linattn/dense.h"
#include "linattn/error.h"

namespace linattn::testing {
namespace {

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x

constexpr Device kGpu{DeviceType::kCUDA, 0};

// A device mirror of a host tensor / strided rows (same layout).
struct Mirror {
  Buffer buf;
  TensorView view;
  size_t bytes = 0;
};

Mirror mirror(const Tensor& store, TensorView view) {
  Mirror m;
  if (!store.defined()) return m;
  // The store plus its 64-byte slack (output views may start shifted into it, see make_rows).
  m.bytes = static_cast<size_t>(store.numel()) * dtype_size(store.dtype()) + 64;
  m.buf = Buffer(kGpu, m.bytes);
  m.view = view;
  m.view.data = static_cast<char*>(m.buf.data()) +
                (static_cast<const char*>(view.data) - static_cast<const char*>(store.view().data));
  m.view.device = kGpu;
  return m;
}

void upload(const Mirror& m, const Tensor& store) {
  if (m.bytes) {
    EXPECT_EQ(cudaMemcpy(m.buf.data(), store.view().data, m.bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
}
void download(Tensor& store, const Mirror& m) {
  if (m.bytes) {
    EXPECT_EQ(cudaMemcpy(store.view().data, m.buf.data(), m.bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  }
}

struct DevData {
  Mirror x, residual, dy, weight, bias, h0, cu, dht;
  ConvInputs in;
  TensorView dht_view;
};

struct DevResults {
  Mirror y, dx, dres, ht, dw, db, dh0;
  ConvOutputs out;
  ConvGrads grads;
};

DevData make_dev(const ConvData& d) {
  DevData g;
  g.x = mirror(d.x.store, d.x.view);
  g.dy = mirror(d.dy.store, d.dy.view);
  g.residual = mirror(d.residual.store, d.residual.view);
  g.weight = mirror(d.weight, d.weight);
  g.bias = mirror(d.bias, d.bias);
  g.h0 = mirror(d.h0, d.h0);
  g.cu = mirror(d.cu, d.cu);
  g.dht = mirror(d.dht, d.dht);
  g.in.x = g.x.view, g.in.weight = g.weight.view;
  if (d.c.bias) g.in.bias = g.bias.view;
  if (d.c.residual) g.in.residual = g.residual.view;
  if (d.c.h0) g.in.initial_state = g.h0.view;
  if (d.c.varlen()) g.in.cu_seqlens = g.cu.view;
  if (d.c.dht) g.dht_view = g.dht.view;
  return g;
}

void upload_all(const DevData& g, const ConvData& d) {
  upload(g.x, d.x.store), upload(g.dy, d.dy.store), upload(g.residual, d.residual.store);
  upload(g.weight, d.weight), upload(g.bias, d.bias), upload(g.h0, d.h0), upload(g.cu, d.cu), upload(g.dht, d.dht);
}

DevResults make_dev(const ConvResults& r) {
  DevResults g;
  g.y = mirror(r.y.store, r.y.view), g.dx = mirror(r.dx.store, r.dx.view), g.dres = mirror(r.dres.store, r.dres.view);
  g.ht = mirror(r.ht, r.ht), g.dw = mirror(r.dw, r.dw), g.db = mirror(r.db, r.db), g.dh0 = mirror(r.dh0, r.dh0);
  g.out.y = g.y.view;
  if (r.ht.defined()) g.out.final_state = g.ht.view;
  g.grads.dx = g.dx.view, g.grads.dweight = g.dw.view;
  if (r.db.defined()) g.grads.dbias = g.db.view;
  if (r.dres.store.defined()) g.grads.dresidual = g.dres.view;
  if (r.dh0.defined()) g.grads.dinitial_state = g.dh0.view;
  return g;
}

void upload_all(const DevResults& g, const ConvResults& r) {
  upload(g.y, r.y.store), upload(g.dx, r.dx.store), upload(g.dres, r.dres.store), upload(g.ht, r.ht);
  upload(g.dw, r.dw), upload(g.db, r.db), upload(g.dh0, r.dh0);
}

void download_all(ConvResults& r, const DevResults& g) {
  download(r.y.store, g.y), download(r.dx.store, g.dx), download(r.dres.store, g.dres), download(r.ht, g.ht);
  download(r.dw, g.dw), download(r.db, g.db), download(r.dh0, g.dh0);
}

void run(const ConvData& d, const DevData& g, const DevResults& gr, const ExecContext& ctx = {}) {
  conv_fwd(g.in, gr.out, d.options(), ctx);
  conv_bwd(g.in, g.dy.view, g.dht_view, gr.grads, d.options(), ctx);
}

void check_case(const ConvCase& c) {
  SCOPED_TRACE(c.str());
  ConvData d = make_data(c);
  ConvResults r = make_results(d, c.seed + 7);
  const ConvResults before = clone(r);
  DevData g = make_dev(d);
  DevResults gr = make_dev(r);
  upload_all(g, d);
  upload_all(gr, r);
  run(d, g, gr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  download_all(r, gr);
  expect_matches_ref(d, r, before);
}

TEST(ConvCuda, EveryWidthDtypeAndOptionOnAwkwardLengths) {
  std::mt19937_64 rng(77);
  int seed = 500;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (int W : {1, 2, 3, 4, 5, 8})
      for (int variant = 0; variant < 4; ++variant) {
        ConvCase c;
        c.dtype = dt, c.W = W, c.seed = ++seed;
        c.D = variant % 2 ? 37 : 136;  // 37: element-copy path; 136: vector path, two tiles
        c.act = variant < 2 ? Activation::kSilu : Activation::kNone;
        c.bias = rng() % 2, c.residual = rng() % 2, c.h0 = rng() % 2, c.ht = rng() % 2;
        c.dht = c.ht && rng() % 2;
        if (variant == 3) c.B = 3, c.T = 2 * W + 70;
        else c.lens = {0, 1, std::max(W - 1, 0), W, W + 1, 130, 0, 2};
        check_case(c);
      }
}

TEST(ConvCuda, LongSequencesManyTilesAndGroups) {
  int seed = 600;
  for (DType dt : {DType::kBF16, DType::kF32})
    for (int W : {4, 3}) {
      ConvCase c;
      c.dtype = dt, c.W = W, c.seed = ++seed, c.D = 1040;
      c.bias = c.residual = c.h0 = c.ht = c.dht = true;
      c.lens = {3000, 1, 64, 65, 2047};
      check_case(c);
      ConvCase dense = c;
      dense.lens.clear(), dense.B = 2, dense.T = 1333, dense.strided = true;
      check_case(dense);
    }
}

// Sized for the register-streaming kernels (16-byte aligned rows, D a multiple of 16 / sizeof(E)):
// runs of 16 rows per warp, so many short sequences start and end inside a run or cross from one
// run (and row group) to the next; 264 channels leave the last channel span mostly idle.
TEST(ConvCuda, StreamingRunsCrossedBySequences) {
  std::mt19937_64 rng(91);
  int seed = 650;
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32})
    for (int W : {2, 3, 4, 6}) {
      ConvCase c;
      c.dtype = dt, c.W = W, c.seed = ++seed, c.D = 264;
      c.bias = rng() % 2, c.residual = rng() % 2, c.h0 = rng() % 2, c.ht = rng() % 2;
      c.dht = c.ht && rng() % 2;
      c.act = rng() % 3 ? Activation::kSilu : Activation::kNone;
      c.lens = {1, 2, 3, 4, 5, 6, 7, 9, 11, 13, 0, 40, 7, 17, 64, 65, 3, 129, 8, 16};
      check_case(c);
      ConvCase dense = c;
      dense.lens.clear(), dense.B = 2, dense.T = 300, dense.strided = true;
      check_case(dense);
    }
}

TEST(ConvCuda, SmallTensorDtypesAndInt64Offsets) {
  int seed = 700;
  for (DType small : {DType::kBF16, DType::kF16}) {
    ConvCase c;
    c.dtype = DType::kF16, c.small_dtype = small, c.seed = ++seed, c.D = 64, c.cu_dtype = DType::kI64;
    c.bias = c.residual = c.h0 = c.ht = c.dht = true;
    c.lens = {5, 0, 300, 3};
    check_case(c);
  }
}

TEST(ConvCuda, RunsAreBitwiseReproducible) {
  ConvCase c;
  c.lens = {5000, 3, 0, 3000}, c.D = 256, c.dtype = DType::kBF16, c.bias = c.h0 = true;
  ConvData d = make_data(c);
  ConvResults a = make_results(d, 1), b = make_results(d, 1);
  DevData g = make_dev(d);
  upload_all(g, d);
  DevResults ga = make_dev(a), gb = make_dev(b);
  run(d, g, ga);
  run(d, g, gb);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  download_all(a, ga), download_all(b, gb);
  EXPECT_TRUE(same_rows("dx", d, a.dx.view, b.dx.view));
  EXPECT_TRUE(same_flat("dweight", a.dw, b.dw));
  EXPECT_TRUE(same_flat("dbias", a.db, b.db));
}

// The forward variants (LINATTN_CONV_CUDA_FWD, conv_run.cuh: FwdVariant): each variant against the fp64 reference for every option (silu / none, bias, residual, initial and
// final state), W 2-4, the given dtypes, varlen with 0-length and short sequences and dense B = 2;
// y and the final state also bitwise equal to the v6 kernel's (the same operations in the same
// order). 520 channels: 2 spans of bf16 (the last one 8 channels wide), 3 of fp32.
struct EnvGuard {
  explicit EnvGuard(const char* v) { setenv("LINATTN_CONV_CUDA_FWD", v, 1); }
  ~EnvGuard() { unsetenv("LINATTN_CONV_CUDA_FWD"); }
};

bool sanitized() { return std::getenv("LINATTN_SANITIZED") != nullptr; }

// quick (compute-sanitizer runs): W 4 dense with silu, W 4 varlen with residual, bias and states, W 2 varlen.
// D: channels (520 unless a test needs more channel blocks).
void check_fwd_variants(const std::vector<const char*>& variants, const std::vector<DType>& dtypes, int seed,
                        bool quick = false, int64_t D = 520) {
  for (const char* v : variants)
    for (DType dt : dtypes)
      for (int W : {4, 3, 2})
        for (int opt = 0; opt < (W == 4 ? 8 : 2); ++opt) {
          if (quick && !(W == 4 && (opt == 1 || opt == 6)) && !(W == 2 && opt == 0)) continue;
          ConvCase c;
          c.dtype = dt, c.W = W, c.seed = ++seed, c.D = D;
          c.act = opt % 2 ? Activation::kSilu : Activation::kNone;
          c.residual = (opt / 2) % 2;
          c.bias = c.h0 = c.ht = c.dht = (opt / 4) % 2 || W != 4;
          if ((opt + W) % 2) c.B = 2, c.T = 333;
          else c.lens = {0, 1, 2, 3, 130, 7, 300, 64, 65, 0, 2, 17};
          SCOPED_TRACE(std::string("LINATTN_CONV_CUDA_FWD=") + v + " " + c.str());
          ConvData d = make_data(c);
          ConvResults r = make_results(d, c.seed + 7);
          const ConvResults before = clone(r);
          ConvResults r6 = clone(r);
          DevData g = make_dev(d);
          DevResults gr = make_dev(r), g6 = make_dev(r6);
          upload_all(g, d);
          upload_all(gr, r), upload_all(g6, r6);
          {
            EnvGuard e(v);
            run(d, g, gr);  // forward and backward: every output against the reference
          }
          {
            EnvGuard e("v6");
            conv_fwd(g.in, g6.out, d.options());  // the forward reference only
          }
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          download_all(r, gr), download_all(r6, g6);
          expect_matches_ref(d, r, before);
          EXPECT_TRUE(same_rows("y", d, r.y.view, r6.y.view));
          EXPECT_TRUE(same_flat("final_state", r.ht, r6.ht));
        }
}

TEST(ConvCuda, ForwardVariantsMatchReferenceAndV6) {
  check_fwd_variants({"v6", "blocks=1", "waves=2,v6", "blocks=5", "waves=1"}, {DType::kBF16, DType::kF16, DType::kF32},
                     800);
}

// x=cp (conv_fwd_tma.cu): v6's cp.async ring with y staged in shared memory and written by bulk row stores
// (bf16 / fp16 with W = 4 on sm_90; other dtypes / W run v6 on the same grid); blocks= / waves= give groups
// of many tiles with sequences crossing them. Under LINATTN_SANITIZED (compute-sanitizer runs) bf16, two
// variants, 3 cases each.
TEST(ConvCuda, ForwardBulkYMatchesReferenceAndV6) {
  if (sanitized()) {
    check_fwd_variants({"x=cp,blocks=3", "x=cp,waves=2"}, {DType::kBF16}, 900, true);
    return;
  }
  check_fwd_variants({"x=cp", "x=cp,waves=2", "x=cp,blocks=5", "x=cp,waves=1", "v6,x=cp,blocks=3"},
                     {DType::kBF16, DType::kF16, DType::kF32}, 900);
}

// A bf16 forward of one 100-token sequence, D 64, inputs on the device: for the tests of the switches' errors.
ConvCase small_case() {
  ConvCase c;
  c.dtype = DType::kBF16, c.D = 64, c.lens = {100};
  return c;
}
struct SmallFwd {
  ConvData d = make_data(small_case());
  ConvResults r = make_results(d, 5);
  DevData g = make_dev(d);
  DevResults gr = make_dev(r);
  SmallFwd() { upload_all(g, d); }
  void run() const { conv_fwd(g.in, gr.out, d.options()); }
};

// Bad values and the switches of the variants removed in session 10 (v7 rings / L2 hints, v8 / v9 bulk x,
// y stores, orders, staging, tile stores, v10 phases, v11 register streaming): an error naming the
// variable, the value and the accepted values, never a silent fallback.
TEST(ConvCuda, ForwardVariantRejectsUnknownAndRemovedKeys) {
  const SmallFwd f;
  for (const char* bad : {"blocks=0", "waves=", "blocks", "speed=max", "x=cp,speed=max", "ring=8x4", "ring=16x3",
                          "ld=first", "st=first", "pf=256", "tma", "x=bulk", "x=cp,y=bulk", "y=st16", "x=cp,y=tile",
                          "order=spread", "x=cp,ystage=3", "phase=32", "pbuf=2", "pst=cs", "reg", "reg=4",
                          "reg=16,rx=cp", "yst=plain", "x=cp,waves=2,ring=8x6"}) {
    EnvGuard e(bad);
    try {
      f.run();
      ADD_FAILURE() << "no error for LINATTN_CONV_CUDA_FWD=" << bad;
    } catch (const Error& err) {
      const std::string m = err.what();
      EXPECT_NE(m.find(std::string("LINATTN_CONV_CUDA_FWD=") + bad), std::string::npos) << m;
      EXPECT_TRUE(m.find("accepted: v6, x=cp") != std::string::npos || m.find("expected 1 .. 2^22") != std::string::npos)
          << m;
    }
  }
}

// LINATTN_CONV_CUDA_PATH=stream (the v4 streaming kernels, removed) and LINATTN_CONV_CUDA_FWD_ROWS: errors.
// The variables are read once per process, so each case runs in a fresh process (threadsafe death-test style);
// the child exits 0 when the forward threw the expected message.
[[noreturn]] void removed_path_child(int which) {
  if (which == 0) setenv("LINATTN_CONV_CUDA_PATH", "stream", 1);
  else setenv("LINATTN_CONV_CUDA_FWD_ROWS", "16", 1);
  const SmallFwd f;
  try {
    f.run();
  } catch (const Error& err) {
    const std::string m = err.what();
    const bool ok = which == 0 ? m.find("LINATTN_CONV_CUDA_PATH=stream") != std::string::npos &&
                                     m.find("expected run or tiles") != std::string::npos
                               : m.find("LINATTN_CONV_CUDA_FWD_ROWS") != std::string::npos;
    std::fprintf(stderr, "%s\n", m.c_str());
    std::exit(ok ? 0 : 2);
  }
  std::exit(3);
}

TEST(ConvCuda, RemovedPathSwitchesAreErrors) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(removed_path_child(0), ::testing::ExitedWithCode(0), "LINATTN_CONV_CUDA_PATH=stream");
  EXPECT_EXIT(removed_path_child(1), ::testing::ExitedWithCode(0), "LINATTN_CONV_CUDA_FWD_ROWS");
}

void set_layout(ConvData& d, const std::vector<int64_t>& lens) {
  d.c.lens = lens;
  int64_t s = 0;
  for (size_t i = 0; i < lens.size(); ++i) d.cu.set(static_cast<int64_t>(i) + 1, s += lens[i]);
}

TEST(ConvCuda, GraphReplayMatchesEagerFixedOverSixLayouts) {
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    ConvCase c;
    c.dtype = dt, c.D = 200, c.W = 4, c.T = 1000, c.graph = true;
    c.lens = {250, 250, 250, 250};
    c.bias = c.residual = c.h0 = c.ht = c.dht = true;
    ConvData d = make_data(c);
    ConvResults r = make_results(d, 3);
    DevData g = make_dev(d);
    DevResults gr = make_dev(r), fixed = make_dev(r);
    upload_all(g, d);
    Buffer ws(kGpu, conv_bwd_workspace_bytes(g.in, d.options()));
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreate(&stream));
    ExecContext ctx;
    ctx.stream = stream, ctx.workspace = ws.data(), ctx.workspace_bytes = ws.bytes();
    run(d, g, gr, ctx);  // eager warm-up
    CUDA_OK(cudaStreamSynchronize(stream));
    cudaGraph_t graph;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    run(d, g, gr, ctx);
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    const std::vector<std::vector<int64_t>> layouts = {
        {250, 250, 250, 250}, {10, 900, 3, 50}, {400, 100, 0, 0}, {5, 1, 2, 0}, {1000, 0, 0, 0}, {0, 999, 1, 0}};
    uint64_t seed = 90;
    for (int pass = 0; pass < 2; ++pass)
      for (const auto& lens : layouts) {
        set_layout(d, lens);
        refill(d, ++seed);
        refill_results(r, seed);
        SCOPED_TRACE(d.c.str());
        const ConvResults before = clone(r);
        upload_all(g, d);
        upload_all(gr, r);
        upload_all(fixed, r);
        CUDA_OK(cudaGraphLaunch(exec, stream));
        run(d, g, fixed, ctx);
        CUDA_OK(cudaStreamSynchronize(stream));
        ConvResults eager = clone(before);
        download_all(r, gr);
        download_all(eager, fixed);
        expect_matches_ref(d, r, before);
        EXPECT_TRUE(same_rows("y", d, r.y.view, eager.y.view));
        EXPECT_TRUE(same_rows("dx", d, r.dx.view, eager.dx.view));
        EXPECT_TRUE(same_flat("final_state", r.ht, eager.ht));
        EXPECT_TRUE(same_flat("dweight", r.dw, eager.dw));
        EXPECT_TRUE(same_flat("dbias", r.db, eager.db));
        EXPECT_TRUE(same_flat("dinitial_state", r.dh0, eager.dh0));
      }
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaStreamDestroy(stream));
  }
}

}  // namespace
}  // namespace linattn::testing

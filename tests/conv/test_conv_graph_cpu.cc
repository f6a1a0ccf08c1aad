// Fixed-capacity (use_graph = true) short conv on the CPU, GRAPH_CONTRACT.md section 8: static
// buffers, eager warm-up, one capture with linattn::Graph (and, for the rule checks, a minimal
// recorder on the capture hook), then replays over six layouts (equal splits, varlen, zero-length tail, actual T < T_max, one
// sequence filling the bucket, other splits) with new inputs and garbage in the padding rows.
// Each replay is checked against the fp64 reference, against the eager fixed-capacity call
// (bitwise) and against the eager exact-size call (y / dx / states bitwise, dweight within
// tolerance: its row groups differ), and padding rows of y / dx / dresidual stay untouched.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "conv_case.h"
#include "core/capture.h"
#include "linattn/graph.h"
#include "linattn/error.h"

namespace linattn::testing {
namespace {

class Recorder : public CaptureSink {
 public:
  void record(std::string name, std::function<void()> work) override {
    names.push_back(std::move(name));
    work_.push_back(std::move(work));
  }
  void replay() const {
    for (const auto& w : work_) w();
  }
  std::vector<std::string> names;

 private:
  std::vector<std::function<void()>> work_;
};

struct Scope {  // an active capture for the lifetime of the object
  explicit Scope(CaptureSink* s) { set_active_cpu_capture(s); }
  ~Scope() { set_active_cpu_capture(nullptr); }
};

void set_layout(ConvData& d, const std::vector<int64_t>& lens) {
  ASSERT_EQ(static_cast<int64_t>(lens.size()), d.c.N());
  d.c.lens = lens;
  int64_t s = 0;
  for (size_t i = 0; i < lens.size(); ++i) d.cu.set(static_cast<int64_t>(i) + 1, s += lens[i]);
  ASSERT_LE(s, d.c.T);
}

void call(const ConvData& d, const ConvInputs& in, const ConvResults& r, const ConvOptions& opt,
          const ExecContext& ctx) {
  conv_fwd(in, r.outputs(), opt, ctx);
  conv_bwd(in, d.dy.view, d.dht, r.grads(), opt, ctx);
}

// The first `rows` rows of a [1, T, D] view.
TensorView head(TensorView v, int64_t rows) {
  v.shape[1] = rows;
  return v;
}

TEST(ConvGraphCpu, ReplayMatchesEagerOverSixLayouts) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (bool silu : {true, false}) {
      ConvCase c;
      c.dtype = dt, c.D = 40, c.W = 4, c.T = 300, c.graph = true, c.strided = dt == DType::kBF16;
      c.lens = {75, 75, 75, 75};
      c.act = silu ? Activation::kSilu : Activation::kNone;
      c.bias = c.residual = c.h0 = c.dht = true;
      c.ht = silu;
      ConvData d = make_data(c);
      ConvResults r = make_results(d, 11);
      const ConvOptions opt = d.options();
      std::vector<float> ws(conv_bwd_workspace_bytes(d.inputs(), opt) / 4);
      ExecContext ctx;
      ctx.workspace = ws.data(), ctx.workspace_bytes = ws.size() * 4;

      call(d, d.inputs(), r, opt, ctx);  // eager warm-up (fixed capacity)
      Graph graph;
      graph.capture([&] { call(d, d.inputs(), r, opt, ctx); });
      ASSERT_EQ(graph.node_names(), (std::vector<std::string>{"conv_fwd", "conv_bwd"}));

      const std::vector<std::vector<int64_t>> layouts = {
          {75, 75, 75, 75}, {10, 200, 3, 50}, {100, 50, 0, 0}, {5, 1, 2, 0}, {300, 0, 0, 0}, {0, 299, 1, 0}};
      uint64_t seed = 1000;
      for (int pass = 0; pass < 2; ++pass)
        for (const auto& lens : layouts) {
          set_layout(d, lens);
          refill(d, ++seed);
          refill_results(r, seed);
          const ConvResults before = clone(r);
          graph.replay();
          SCOPED_TRACE(d.c.str());
          expect_matches_ref(d, r, before);

          ConvResults fixed = clone(before);
          call(d, d.inputs(), fixed, opt, ctx);
          EXPECT_TRUE(same_rows("y", d, r.y.view, fixed.y.view));
          EXPECT_TRUE(same_rows("dx", d, r.dx.view, fixed.dx.view));
          EXPECT_TRUE(same_rows("dresidual", d, r.dres.view, fixed.dres.view));
          if (c.ht) {
            EXPECT_TRUE(same_flat("final_state", r.ht, fixed.ht));
          }
          EXPECT_TRUE(same_flat("dweight", r.dw, fixed.dw));
          EXPECT_TRUE(same_flat("dbias", r.db, fixed.db));
          EXPECT_TRUE(same_flat("dinitial_state", r.dh0, fixed.dh0));

          const int64_t S = d.c.real_rows();
          ConvInputs ex = d.inputs();
          ex.x = head(ex.x, S), ex.residual = head(ex.residual, S);
          ConvOptions eo = opt;
          eo.use_graph = false, eo.max_num_seqs = 0;
          ConvResults exact = clone(before);
          ConvOutputs eout = exact.outputs();
          eout.y = head(eout.y, S);
          ConvGrads eg = exact.grads();
          eg.dx = head(eg.dx, S), eg.dresidual = head(eg.dresidual, S);
          conv_fwd(ex, eout, eo);
          conv_bwd(ex, head(d.dy.view, S), d.dht, eg, eo);
          EXPECT_TRUE(same_rows("y (exact)", d, r.y.view, exact.y.view));
          EXPECT_TRUE(same_rows("dx (exact)", d, r.dx.view, exact.dx.view));
          if (c.ht) {
            EXPECT_TRUE(same_flat("final_state (exact)", r.ht, exact.ht));
          }
          EXPECT_TRUE(same_flat("dinitial_state (exact)", r.dh0, exact.dh0));
          EXPECT_TRUE(close_flat("dweight (exact)", r.dw, exact.dw.to(DType::kF64), 1e-5, 1e-4));
        }
    }
}

TEST(ConvGraphCpu, CaptureRejectsEagerPathAndMissingWorkspace) {
  ConvCase c;
  c.lens = {5, 6}, c.T = 20, c.D = 16, c.graph = true;
  ConvData d = make_data(c);
  ConvResults r = make_results(d, 1);
  ConvOptions eager = d.options();
  eager.use_graph = false, eager.max_num_seqs = 0;
  Recorder rec;
  Scope cap(&rec);
  try {
    conv_fwd(d.inputs(), r.outputs(), eager);
    ADD_FAILURE() << "eager conv_fwd during a capture did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCaptureViolation) << e.what();
    EXPECT_EQ(e.category(), FailureCategory::kEagerBackend) << e.what();
  }
  try {
    conv_bwd(d.inputs(), d.dy.view, {}, r.grads(), d.options());
    ADD_FAILURE() << "graph conv_bwd without workspace did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), FailureCategory::kAddressOrLifetime) << e.what();
    EXPECT_NE(e.message().find("workspace"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(rec.names.empty());
}

// Offsets are data read at replay: garbage (past capacity, decreasing) must neither throw nor
// address outside the tensors (the ASan run checks the latter); rows past capacity stay intact.
TEST(ConvGraphCpu, ReplayWithGarbageOffsetsStaysInBounds) {
  ConvCase c;
  c.lens = {5, 6, 4}, c.T = 20, c.D = 16, c.graph = true, c.h0 = c.dht = c.ht = true;
  ConvData d = make_data(c);
  ConvResults r = make_results(d, 1);
  std::vector<float> ws(conv_bwd_workspace_bytes(d.inputs(), d.options()) / 4);
  ExecContext ctx;
  ctx.workspace = ws.data(), ctx.workspace_bytes = ws.size() * 4;
  Recorder rec;
  {
    Scope cap(&rec);
    call(d, d.inputs(), r, d.options(), ctx);
  }
  for (const std::vector<int64_t>& cu : {std::vector<int64_t>{0, 25, 3, 40}, {-5, 7, 2, 1}, {3, 3, 100, -1}}) {
    for (int i = 0; i < 4; ++i) d.cu.set(i, static_cast<double>(cu[i]));
    EXPECT_NO_THROW(rec.replay());
  }
}

}  // namespace
}  // namespace linattn::testing

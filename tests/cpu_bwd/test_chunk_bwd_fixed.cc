// Fixed-capacity backward (use_graph = true) on the CPU, GRAPH_CONTRACT.md section 8 for the
// backward op: static buffers of T_max rows and N_max sequences, several layouts (dense,
// varlen, zero-length tail sequences, actual T < T_max, one sequence filling the bucket) with
// NaN garbage in every padding row of every input. Checks: eager-fixed against the fp64
// reference on the valid rows; padding gradients exactly 0; zero-length sequences pass d_ht
// through to dh0; one capture (through run_or_record) replayed for every layout equals
// eager-fixed bitwise, including repeated replays (no stale metadata).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "bwd_test_util.h"
#include "core/capture.h"

namespace linattn::test {
namespace {

// Minimal recording sink: what a CPU Graph does with the closures it is handed.
class RecordingSink : public CaptureSink {
 public:
  void record(std::string, std::function<void()> work) override { works_.push_back(std::move(work)); }
  void replay() const {
    for (const auto& w : works_) w();
  }
  size_t size() const { return works_.size(); }

 private:
  std::vector<std::function<void()>> works_;
};

constexpr int64_t kTmax = 150, kNmax = 4;

void copy_into(Tensor& dst, const Tensor& src) {
  ASSERT_EQ(dst.view().nbytes(), src.view().nbytes());
  std::memcpy(dst.view().data, src.view().data, src.view().nbytes());
}

// NaN in rows [r0, T) of a [1, T, ...] float tensor.
void poison_rows(Tensor& t, int64_t r0) {
  if (!t.defined()) return;
  const int64_t T = t.shape()[1], inner = t.numel() / T;
  for (int64_t i = r0 * inner; i < T * inner; ++i) t.set(i, std::numeric_limits<double>::quiet_NaN());
}

struct Layout {
  const char* name;
  std::vector<int64_t> lens;  // exactly kNmax entries (zeros = empty / tail sequences)
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> l = {
      {"dense", {37, 37, 37, 37}},
      {"varlen", {64, 1, 33, 17}},
      {"zero_tail", {90, 25, 0, 0}},
      {"short", {5, 0, 12, 3}},
      {"one_fills", {kTmax, 0, 0, 0}},
      {"split", {0, 63, 65, 2}},
  };
  return l;
}

class ChunkBwdFixed : public ::testing::TestWithParam<ChunkOp> {};

TEST_P(ChunkBwdFixed, GraphSequence) {
  const ChunkOp op = GetParam();
  for (int bt : {64, 32}) {
    auto spec_for = [&](const Layout& l, uint64_t seed) {
      ChunkAttnSpec s;
      s.opt.op = op;
      s.opt.chunk_size = bt;
      s.opt.use_qk_l2norm_in_kernel = s.opt.use_gate_in_kernel = s.opt.use_beta_sigmoid_in_kernel = true;
      s.opt.output_final_state = true;
      s.opt.use_graph = true;
      s.opt.max_num_seqs = kNmax;
      s.H = 1;
      s.HV = 2;
      s.K = 24;
      s.V = 20;
      s.seqlens = l.lens;
      int64_t used = 0;
      for (int64_t x : l.lens) used += x;
      s.pad_tokens = kTmax - used;
      s.seed = seed;
      return s;
    };
    // Static buffers, shaped by the first layout (all layouts share shapes).
    ChunkAttnData stat = make_chunk_attn(spec_for(layouts()[0], 1));
    Rng crng(3);
    ChunkAttnCotangents scot = random_cotangents(stat, crng, DType::kF32, true);
    ChunkAttnGradTensors sgrad = alloc_grads(stat, DType::kF32, DType::kF32);
    RecordingSink sink;
    set_active_cpu_capture(&sink);
    chunk_attn_bwd(stat.inputs(), scot.d_o.view(), scot.d_final_state.view(), sgrad.views(), stat.opt());
    set_active_cpu_capture(nullptr);
    ASSERT_EQ(sink.size(), 1u);

    uint64_t seed = 10;
    for (const Layout& l : layouts()) {
      SCOPED_TRACE(std::string(l.name) + " BT " + std::to_string(bt));
      ChunkAttnData d = make_chunk_attn(spec_for(l, ++seed));
      Rng rng(seed * 7);
      ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kF32, true);
      const ChunkAttnGradTensors ref = ref_backward(d, cot);
      for (Tensor* t : {&d.q, &d.k, &d.v, &d.g, &d.beta, &cot.d_o}) poison_rows(*t, d.valid_tokens);
      // Eager fixed-capacity call.
      const ChunkAttnGradTensors eager = cpu_backward(d, cot);
      EXPECT_TRUE(bwd_close(d, ref, eager, DType::kF32));
      for (const auto& [name, t] : {std::pair{"dq", &eager.dq}, {"dk", &eager.dk}, {"dv", &eager.dv},
                                    {"dg", &eager.dg}, {"dbeta", &eager.dbeta}})
        EXPECT_TRUE(rows_zero(name, *t, d.valid_tokens));
      for (int64_t n = 0; n < kNmax; ++n) {
        if (l.lens[n] != 0) continue;
        const int64_t sz = eager.dinitial_state.numel() / kNmax;
        for (int64_t i = n * sz; i < (n + 1) * sz; ++i)
          ASSERT_EQ(eager.dinitial_state.get(i), cot.d_final_state.get(i)) << "seq " << n;
      }
      // Replay: copy the layout into the static buffers in place, replay twice.
      for (auto [dst, src] : {std::pair{&stat.q, &d.q}, {&stat.k, &d.k}, {&stat.v, &d.v},
                              {&stat.g, &d.g}, {&stat.beta, &d.beta}, {&stat.A_log, &d.A_log},
                              {&stat.dt_bias, &d.dt_bias}, {&stat.initial_state, &d.initial_state},
                              {&stat.cu_seqlens, &d.cu_seqlens}, {&scot.d_o, &cot.d_o},
                              {&scot.d_final_state, &cot.d_final_state}})
        copy_into(*dst, *src);
      for (int rep = 0; rep < 2; ++rep) {
        sink.replay();
        EXPECT_TRUE(grads_bitwise_equal(eager, sgrad)) << "replay " << rep;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, ChunkBwdFixed, ::testing::Values(ChunkOp::kGdn, ChunkOp::kKda),
                         [](const ::testing::TestParamInfo<ChunkOp>& i) {
                           return std::string(i.param == ChunkOp::kGdn ? "gdn" : "kda");
                         });

}  // namespace
}  // namespace linattn::test

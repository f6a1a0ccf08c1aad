// Bad inputs to the reference (which validates exactly like every backend, through
// meta::describe_chunk_attn and friends) raise linattn::Error naming the argument: a sweep of
// one-mutation cases for the forward and the backward, then a seeded fuzz of shapes, dtypes,
// options and cu_seqlens that must either pass or throw linattn::Error (never crash: the ASan run
// checks that nothing is read out of bounds).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "common/chunk_attn_check.h"
#include "linattn/error.h"
#include "ref/chunk_attn_ref.h"

namespace linattn::test {
namespace {

struct Case {
  ChunkAttnData d;
  ChunkAttnOutTensors out;
  ChunkAttnCotangents cot;
  ChunkAttnGradTensors grads;
  std::function<void(ChunkAttnInputs&)> tweak;  // edits the views (strides, device)
};

Case valid(ChunkOp op, bool varlen) {
  ChunkAttnSpec s;
  s.opt.op = op;
  s.opt.output_final_state = true;
  s.H = 2;
  s.HV = 4;
  s.K = 4;
  s.V = 3;
  if (varlen) {
    s.seqlens = {3, 0, 4};
    s.pad_tokens = 2;
  } else {
    s.B = 2;
    s.T = 5;
  }
  Case r;
  r.d = make_chunk_attn(s);
  r.out = alloc_outputs(r.d, DType::kF32, DType::kF32);
  Rng rng(5);
  r.cot = random_cotangents(r.d, rng, DType::kF32, true);
  r.grads = alloc_grads(r.d, DType::kF32, DType::kF32);
  return r;
}

ChunkAttnInputs inputs(const Case& s) {
  ChunkAttnInputs in = s.d.inputs();
  if (s.tweak) s.tweak(in);
  return in;
}
void run_fwd(const Case& s) { ref::chunk_attn_fwd(inputs(s), s.out.views(), s.d.opt()); }
void run_bwd(const Case& s) {
  ref::chunk_attn_bwd(inputs(s), s.cot.d_o.view(), s.cot.d_final_state.view(), s.grads.views(),
                      s.d.opt());
}

// Applies `mutate` to a valid setup and expects both passes to throw an Error naming `arg`.
void expect_named_error(ChunkOp op, bool varlen, const std::string& arg,
                        const std::function<void(Case&)>& mutate, bool fwd = true,
                        bool bwd = true) {
  Case s = valid(op, varlen);
  ASSERT_NO_THROW(run_fwd(s));
  ASSERT_NO_THROW(run_bwd(s));
  mutate(s);
  for (int pass = 0; pass < 2; ++pass) {
    if ((pass == 0 && !fwd) || (pass == 1 && !bwd)) continue;
    const char* which = pass == 0 ? "forward" : "backward";
    try {
      pass == 0 ? run_fwd(s) : run_bwd(s);
      ADD_FAILURE() << which << ": no error, expected one naming '" << arg << "'";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find(arg), std::string::npos)
          << which << ": expected the message to name '" << arg << "', got: " << e.message();
    }
  }
}

Tensor f32(std::vector<int64_t> shape) { return full(DType::kF32, std::move(shape), 0.5); }

class RefValidation : public ::testing::TestWithParam<ChunkOp> {};

TEST_P(RefValidation, ShapesAndRanks) {
  const ChunkOp op = GetParam();
  const bool kda = op == ChunkOp::kKda;
  expect_named_error(op, false, "q", [](Case& s) { s.d.q = f32({2, 5, 2}); });
  expect_named_error(op, false, "q", [](Case& s) { s.d.q = f32({2, 5, 2, 4, 1}); });
  expect_named_error(op, false, "k", [](Case& s) { s.d.k = f32({2, 5, 3, 4}); });  // heads
  expect_named_error(op, false, "k", [](Case& s) { s.d.k = f32({2, 5, 2, 5}); });  // K vs q
  expect_named_error(op, false, "k", [](Case& s) { s.d.k = f32({2, 4, 2, 4}); });  // T
  expect_named_error(op, false, "v", [](Case& s) { s.d.v = f32({2, 5, 3, 3}); });  // HV % H
  expect_named_error(op, false, "v", [](Case& s) { s.d.v = f32({1, 5, 4, 3}); });  // B
  expect_named_error(op, false, "g", [&](Case& s) {
    s.d.g = kda ? f32({2, 5, 4}) : f32({2, 5, 4, 4});
  });
  expect_named_error(op, false, "g", [&](Case& s) {
    s.d.g = kda ? f32({2, 5, 4, 3}) : f32({2, 5, 2});
  });
  expect_named_error(op, false, "beta", [](Case& s) { s.d.beta = f32({2, 5, 2}); });
  expect_named_error(op, false, "initial_state", [](Case& s) {
    s.d.initial_state = f32({2, 4, 3, 4});
  });
  expect_named_error(op, false, "initial_state", [](Case& s) {
    s.d.initial_state = f32({3, 4, 4, 3});
  });
  expect_named_error(op, false, "q", [](Case& s) {
    s.d.q = f32({2, 5, 2, 300});
    s.d.k = f32({2, 5, 2, 300});
  });
  expect_named_error(op, false, "q", [](Case& s) {  // not dense: every other element of a wider row
    s.d.q = f32({2, 5, 2, 8});
    s.tweak = [](ChunkAttnInputs& in) {
      in.q.shape[3] = 4;
      in.q.strides[3] = 2;
    };
  });
}

TEST_P(RefValidation, Varlen) {
  const ChunkOp op = GetParam();
  expect_named_error(op, true, "cu_seqlens",
                     [](Case& s) { s.d.cu_seqlens.set(2, 2); });  // [0, 3, 2, 7]
  expect_named_error(op, true, "cu_seqlens[0]", [](Case& s) { s.d.cu_seqlens.set(0, 1); });
  expect_named_error(op, true, "cu_seqlens[3]", [](Case& s) { s.d.cu_seqlens.set(3, 10); });
  expect_named_error(op, true, "cu_seqlens", [](Case& s) { s.d.cu_seqlens = f32({4}); });
  expect_named_error(op, true, "cu_seqlens", [](Case& s) {
    s.d.cu_seqlens = Tensor(DType::kI64, {2, 2});
  });
  expect_named_error(op, true, "cu_seqlens",
                     [](Case& s) { s.d.cu_seqlens = Tensor(DType::kI64, {1}); });
  expect_named_error(op, true, "initial_state", [](Case& s) {
    s.d.cu_seqlens = cu_seqlens_tensor({3, 4}, DType::kI64);
  });
  expect_named_error(op, false, "q", [](Case& s) {
    s.d.cu_seqlens = cu_seqlens_tensor({3, 4}, DType::kI32);
  });  // B > 1
}

TEST_P(RefValidation, DtypesAndDevices) {
  const ChunkOp op = GetParam();
  expect_named_error(op, false, "q", [](Case& s) { s.d.q = s.d.q.to(DType::kI32); });
  expect_named_error(op, false, "k", [](Case& s) { s.d.k = s.d.k.to(DType::kBF16); });
  expect_named_error(op, false, "v", [](Case& s) { s.d.v = s.d.v.to(DType::kI64); });
  expect_named_error(op, false, "g", [](Case& s) { s.d.g = s.d.g.to(DType::kI32); });
  expect_named_error(op, false, "beta", [](Case& s) { s.d.beta = s.d.beta.to(DType::kI32); });
  expect_named_error(
      op, false, "o", [](Case& s) { s.out.o = s.out.o.to(DType::kBF16); }, true, false);
  expect_named_error(op, false, "k", [](Case& s) {
    s.tweak = [](ChunkAttnInputs& in) { in.k.device = {DeviceType::kCUDA, 0}; };
  });
  expect_named_error(
      op, false, "q",
      [](Case& s) {  // all on a device: the reference is host-only
        s.tweak = [](ChunkAttnInputs& in) {
          for (TensorView* t : {&in.q, &in.k, &in.v, &in.g, &in.beta, &in.initial_state})
            t->device = {DeviceType::kCUDA, 0};
        };
      },
      true, false);
  if (op == ChunkOp::kKda)
    expect_named_error(op, false, "initial_state",
                       [](Case& s) { s.d.initial_state = s.d.initial_state.to(DType::kBF16); });
}

TEST_P(RefValidation, Options) {
  const ChunkOp op = GetParam();
  auto opt = [](Case& s) -> ChunkAttnOptions& { return s.d.spec.opt; };
  for (int bt : {0, 8, 48, 128})
    expect_named_error(op, false, "chunk_size", [&](Case& s) { opt(s).chunk_size = bt; });
  expect_named_error(op, false, "allow_neg_eigval",
                     [&](Case& s) { opt(s).allow_neg_eigval = true; });
  expect_named_error(op, false, "scale", [&](Case& s) { opt(s).scale = -1.0; });
  expect_named_error(op, false, "A_log", [&](Case& s) { opt(s).use_gate_in_kernel = true; });
  expect_named_error(op, false, "A_log", [&](Case& s) { s.d.A_log = f32({4}); });
  expect_named_error(op, false, "A_log", [&](Case& s) {
    opt(s).use_gate_in_kernel = true;
    s.d.A_log = Tensor(DType::kBF16, {4});
  });
  expect_named_error(op, false, "A_log", [&](Case& s) {
    opt(s).use_gate_in_kernel = true;
    s.d.A_log = f32({3});
  });
  expect_named_error(op, false, "dt_bias", [&](Case& s) {
    opt(s).use_gate_in_kernel = true;
    s.d.A_log = f32({4});
    s.d.dt_bias = f32({5});
  });
  expect_named_error(
      op, false, "final_state", [&](Case& s) { s.out.final_state = Tensor(); }, true, false);
  expect_named_error(
      op, false, "final_state", [&](Case& s) { opt(s).output_final_state = false; }, true, false);
  expect_named_error(
      op, false, "final_state",
      [&](Case& s) {
        s.out.final_state = f32({2, 4, 3, 4});
      },
      true, false);
  if (op == ChunkOp::kGdn) {
    expect_named_error(op, false, "lower_bound", [&](Case& s) {
      opt(s).has_lower_bound = true;
      opt(s).lower_bound = -1;
    });
  } else {
    expect_named_error(op, false, "lower_bound", [&](Case& s) {
      opt(s).has_lower_bound = true;
      opt(s).lower_bound = 1;
    });
    expect_named_error(op, false, "lower_bound", [&](Case& s) {
      opt(s).use_gate_in_kernel = opt(s).safe_gate = opt(s).has_lower_bound = true;
      opt(s).lower_bound = -6;
      s.d.A_log = f32({4});
    });
  }
}

TEST_P(RefValidation, BackwardArguments) {
  const ChunkOp op = GetParam();
  expect_named_error(
      op, false, "d_o",
      [](Case& s) {
        s.cot.d_o = f32({2, 5, 4, 2});
      },
      false, true);
  expect_named_error(
      op, false, "d_final_state",
      [](Case& s) {
        s.cot.d_final_state = f32({2, 4, 3, 3});
      },
      false, true);
  expect_named_error(
      op, false, "dq",
      [](Case& s) {
        s.grads.dq = f32({2, 5, 4, 4});
      },
      false, true);
  expect_named_error(
      op, false, "dv",
      [](Case& s) {
        s.grads.dv = f32({2, 5, 4, 4});
      },
      false, true);
  expect_named_error(
      op, false, "dg",
      [](Case& s) {
        s.grads.dg = f32({2, 5, 3});
      },
      false, true);
  expect_named_error(
      op, false, "dA_log", [](Case& s) { s.grads.dA_log = f32({4}); }, false, true);
  expect_named_error(
      op, false, "ddt_bias", [](Case& s) { s.grads.ddt_bias = f32({4}); }, false, true);
  expect_named_error(
      op, false, "dinitial_state", [](Case& s) { s.d.initial_state = Tensor(); }, false, true);
}

INSTANTIATE_TEST_SUITE_P(Ops, RefValidation, ::testing::Values(ChunkOp::kGdn, ChunkOp::kKda),
                         [](const auto& info) {
                           return info.param == ChunkOp::kGdn ? "gdn" : "kda";
                         });

}  // namespace
}  // namespace linattn::test

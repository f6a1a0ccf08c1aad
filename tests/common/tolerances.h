// The one tolerance table of linattn's tests: for each input dtype and each checked quantity,
// the bar on FLA's metric (rel RMS error = rms(ref - got) / (rms(ref) + 1e-8), ALGORITHMS.md
// section 8) plus the absolute error below which a comparison passes outright (FLA's err_atol).
// Half dtypes use FLA's own bars (o/ht 0.005, dq/dk/dv/dh0 0.008, dg/dbeta 0.02, conv 1e-3;
// dt_bias 0.008 as KDA's test); fp32 is much tighter; fp64 is for fp64 paths (chunked fp64 forms,
// ref vs ref). Every backend's tests take their bars from here: do not inline numbers in tests.
#pragma once
#include <cstdint>

#include "linattn/tensor.h"

namespace linattn::test {

enum class Qty : uint8_t {
  // chunked GDN / KDA
  kO, kFinalState, kDq, kDk, kDv, kDg, kDbeta, kDh0, kDA_log, kDdt_bias,
  kDdt_bias_head,  // GDN's dt_bias gradient: one per-head sum of dg terms over every token, like dA_log
  // short causal conv
  kConvY, kConvFinalState, kConvDx, kConvDw, kConvDb, kConvDresidual, kConvDh0,
};

struct Tolerance {
  double rel_rms;  // pass when rel RMS error < rel_rms ...
  double atol;     // ... or when max |ref - got| <= atol
};

constexpr const char* qty_name(Qty q) {
  switch (q) {
    case Qty::kO: return "o";
    case Qty::kFinalState: return "final_state";
    case Qty::kDq: return "dq";
    case Qty::kDk: return "dk";
    case Qty::kDv: return "dv";
    case Qty::kDg: return "dg";
    case Qty::kDbeta: return "dbeta";
    case Qty::kDh0: return "dh0";
    case Qty::kDA_log: return "dA_log";
    case Qty::kDdt_bias: return "ddt_bias";
    case Qty::kDdt_bias_head: return "ddt_bias (per head)";
    case Qty::kConvY: return "conv_y";
    case Qty::kConvFinalState: return "conv_final_state";
    case Qty::kConvDx: return "conv_dx";
    case Qty::kConvDw: return "conv_dweight";
    case Qty::kConvDb: return "conv_dbias";
    case Qty::kConvDresidual: return "conv_dresidual";
    case Qty::kConvDh0: return "conv_dh0";
  }
  return "?";
}

// `input` is the dtype of the op's main inputs (q/k/v, or conv x).
constexpr Tolerance tolerance(DType input, Qty q) {
  switch (input) {
    case DType::kF64:
      return {1e-10, 1e-12};
    case DType::kF32:
      switch (q) {
        case Qty::kO: case Qty::kFinalState: return {2e-4, 1e-6};
        case Qty::kDq: case Qty::kDk: case Qty::kDv: case Qty::kDh0: return {3e-4, 1e-6};
        case Qty::kDg: case Qty::kDbeta: case Qty::kDA_log: case Qty::kDdt_bias: case Qty::kDdt_bias_head:
          return {5e-4, 1e-6};
        default: return {1e-4, 1e-6};  // conv
      }
    case DType::kF16:
    case DType::kBF16:
      switch (q) {
        case Qty::kO: case Qty::kFinalState: return {0.005, 1e-6};
        case Qty::kDq: case Qty::kDk: case Qty::kDv: case Qty::kDh0: return {0.008, 1e-6};
        // A scalar-gate (GDN) head's dA_log / ddt_bias is one sum over all of its tokens of the dg
        // terms, which cancel: bf16 storage of the chunk operands leaves an absolute error of
        // ~0.4% of the summands' scale (fp64 emulation, bench/emu/gdn_bwd_gate_precision.py, 16
        // seeds), so they take dg's bar. KDA's per-channel dt_bias keeps FLA's 0.008.
        case Qty::kDg: case Qty::kDbeta: case Qty::kDA_log: case Qty::kDdt_bias_head: return {0.02, 1e-6};
        case Qty::kDdt_bias: return {0.008, 1e-6};
        default: return {1e-3, 1e-6};  // conv
      }
    default:
      return {0.0, 0.0};  // integer dtypes carry no float quantities
  }
}

}  // namespace linattn::test

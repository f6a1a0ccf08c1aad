// Executable spec of the short causal conv (ALGORITHMS.md section 6) in fp64, token by token,
// no tiling, no threads. Inputs are host TensorViews of any float dtype (read exactly as fp64).
// Per sequence n and channel c, with concat = [h0[n,c,0..W-1], x_seq[0..len-1]] (h0 = 0 when
// absent):  z_t = bias + sum_i weight[c,i] * concat[t+1+i],  y_t = act(z_t) + residual_t,
// final[s] = concat[len+s]. The backward is the chain rule through exactly that expression,
// so slot 0 of d_final_state also reaches dx / dinitial_state (FLA drops it).
// Padding rows (graph mode, rows >= cu_seqlens[N]) are 0 in every [B, T, D] result.
#pragma once
#include "linattn/ops.h"
#include "linattn/tensor.h"

namespace linattn::ref {

struct ConvRefFwd {
  Tensor y;            // [B, T, D] fp64
  Tensor final_state;  // [N, D, W] fp64 (always computed)
};

struct ConvRefGrads {
  Tensor dx;              // [B, T, D] fp64
  Tensor dweight;         // [D, W]
  Tensor dbias;           // [D]
  Tensor dresidual;       // [B, T, D] (= dy on real rows)
  Tensor dinitial_state;  // [N, D, W]
};

ConvRefFwd conv_ref_fwd(const ConvInputs& in, const ConvOptions& opt);
// dy [B, T, D]; d_final_state [N, D, W] or absent.
ConvRefGrads conv_ref_bwd(const ConvInputs& in, const TensorView& dy, const TensorView& d_final_state,
                          const ConvOptions& opt);

}  // namespace linattn::ref

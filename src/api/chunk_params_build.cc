// ChunkAttnDesc + tensors -> cpu::ChunkParams. The descriptor already checked shapes, dtypes,
// devices and contiguity; this only copies pointers and resolved options.
#include "api/chunk_params_build.h"

namespace linattn::api {

cpu::ChunkParams build_chunk_params(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                                    const ChunkAttnOutputs* out) {
  cpu::ChunkParams p;
  p.kda = d.kda();
  p.N = d.N;
  p.rows = d.B * d.T;
  p.seq_len = d.varlen ? 0 : d.T;
  p.H = d.H;
  p.HV = d.HV;
  p.G = d.G;
  p.K = d.K;
  p.V = d.V;
  p.BT = d.BT;
  p.qk_dtype = d.dtype;
  p.v_dtype = d.v_dtype;
  p.g_dtype = d.g_dtype;
  p.beta_dtype = d.beta_dtype;
  p.cu_dtype = d.cu_dtype;
  p.q = in.q.data;
  p.k = in.k.data;
  p.v = in.v.data;
  p.g = in.g.data;
  p.beta = in.beta.data;
  p.A_log = d.has_A_log ? in.A_log.ptr<const float>() : nullptr;
  p.dt_bias = d.has_dt_bias ? in.dt_bias.ptr<const float>() : nullptr;
  if (d.has_h0) {
    p.h0 = in.initial_state.data;
    p.h0_dtype = in.initial_state.dtype;
  }
  p.cu_seqlens = d.varlen ? in.cu_seqlens.data : nullptr;
  if (out != nullptr) {
    p.o = out->o.data;
    p.ht = d.has_ht ? out->final_state.ptr<float>() : nullptr;
  }
  p.scale = static_cast<float>(d.scale);
  p.l2norm = d.l2norm;
  p.gate_in_kernel = d.gate_in_kernel;
  p.beta_sigmoid = d.beta_sigmoid;
  p.neg_eigval = d.neg_eigval;
  p.state_v_first = d.state_v_first;
  p.has_lower_bound = d.has_lower_bound;
  p.lower_bound = static_cast<float>(d.lower_bound);
  p.fixed_capacity = d.use_graph;
  return p;
}

}  // namespace linattn::api

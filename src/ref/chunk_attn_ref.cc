// fp64 reference forward of GDN / KDA: for every sequence and value head, walk the tokens in
// order: S <- Diag(e^g_t) S; e = v_t - S^T k_t; S += beta_t k_t e^T; o_t = scale S^T q_t
// (ALGORITHMS.md section 2: decay first, read after the write). Zero-length
// sequences copy their initial state (or zeros) to the final state. Padding rows of o untouched.
#include "ref/chunk_attn_ref.h"

#include <vector>

#include "ref/chunk_attn_detail.h"

namespace linattn::ref {

void chunk_attn_fwd(const ChunkAttnInputs& in, const ChunkAttnOutputs& out,
                    const ChunkAttnOptions& opt) {
  const meta::ChunkAttnDesc d = detail::describe_and_validate(in, opt);
  meta::check_fwd_outputs(d, {out.o, detail::fp64_as_fp32(out.final_state)});
  const std::vector<detail::SeqRange> seqs = detail::sequences(d, in);
  std::vector<double> S(d.K * d.V), o(d.V);
  for (int64_t n = 0; n < d.N; ++n) {
    for (int64_t j = 0; j < d.HV; ++j) {
      const detail::HeadInputs h = detail::load_head(d, in, seqs[n], j);
      if (d.has_h0) {
        detail::load_state(d, in.initial_state, n, j, S.data());
      } else {
        S.assign(S.size(), 0.0);
      }
      for (int64_t t = 0; t < h.L; ++t) {
        detail::step(h, t, S.data());
        detail::read_out(h, t, d.scale, S.data(), o.data());
        const int64_t row = seqs[n].b * d.T + seqs[n].t0 + t;
        for (int64_t vv = 0; vv < d.V; ++vv)
          detail::write(out.o, (row * d.HV + j) * d.V + vv, o[vv]);
      }
      if (opt.output_final_state) detail::store_state(d, out.final_state, n, j, S.data());
    }
  }
}

}  // namespace linattn::ref

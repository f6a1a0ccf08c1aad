// The chunk-local prep outputs (the data buffers of GdnChunkWs) carved in one fixed order, shared by
// the forward's and the backward's workspaces and by the training cache (ChunkAttnOutputs::saved):
// a forward given the cache writes its prep there (with the backward's Ai), and a backward given it
// skips its own prep (the same kernel on the same inputs: bitwise the same values).
// Order: KDA qg, kg, kgl [HV, T, K] io, gl [nt_cap, HV, K] fp32 | GDN gam [HV, T], rq, rk [H, T] fp32;
// then Ab, P (when with_P), Ai (when with_Ai), [HV, T, BT] io each. Every buffer 256-B aligned.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/carver.h"
#include "cuda/gdn/gdn_kernels.h"
#include "cuda/gdn/gdn_params.h"

namespace linattn::cuda {

template <size_t Align>
void carve_prep_outputs(WorkspaceCarver<Align>& c, const GdnFwdParams& f, int BT, int64_t nt_cap, bool with_P,
                        bool with_Ai, GdnChunkWs& ws) {
  const size_t T = size_t(f.T_total), HV = size_t(f.HV), K = size_t(f.K);
  if (f.kda) {  // the gate lives in the gated operands; no gam / rq / rk
    ws.qg = c.template take<uint16_t>(HV * T * K);
    ws.kg = c.template take<uint16_t>(HV * T * K);
    ws.kgl = c.template take<uint16_t>(HV * T * K);
    ws.gl = c.template take<float>(size_t(nt_cap) * HV * K);
  } else {
    ws.gam = c.template take<float>(HV * T);
    ws.rq = c.template take<float>(size_t(f.H) * T);
    ws.rk = c.template take<float>(size_t(f.H) * T);
  }
  ws.Ab = c.template take<uint16_t>(HV * T * size_t(BT));
  if (with_P) ws.P = c.template take<uint16_t>(HV * T * size_t(BT));
  if (with_Ai) ws.Ai = c.template take<uint16_t>(HV * T * size_t(BT));
}

// Bytes of the training cache: every prep output the chunked backward reads.
inline size_t gdn_prep_cache_bytes(const GdnFwdParams& f, int BT, int64_t nt_cap) {
  WorkspaceCarver<256> c{nullptr};
  GdnChunkWs ws;
  carve_prep_outputs(c, f, BT, nt_cap, true, true, ws);
  return c.off;
}

// Points ws's data buffers into a cache of gdn_prep_cache_bytes (T_cap and the tables untouched).
inline void use_prep_cache(void* cache, const GdnFwdParams& f, int BT, int64_t nt_cap, GdnChunkWs& ws) {
  WorkspaceCarver<256> c{static_cast<char*>(cache)};
  carve_prep_outputs(c, f, BT, nt_cap, true, true, ws);
}

}  // namespace linattn::cuda

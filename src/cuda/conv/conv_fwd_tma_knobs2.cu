// The v9 configurations of the bulk-copy forward (conv_fwd_tma.cuh; convtma2), bf16 / fp16 with W = 4
// only: v6's 16-byte cp.async x loads (x=cp) with bulk y stores and deeper y staging (ystage=3 / 4 on
// the 8 x 4 ring, ystage=3 on an 8 x 3 ring: 48 KiB, still 4 blocks per SM) or other rings (8 x 6:
// 3 blocks per SM, 16 x 3: 2), and y=tile (x=cp, 8 x 4: one 2-D tensor-map store per full tile). A
// separate file so it compiles beside conv_fwd_tma{,_knobs}.cu. Returns false where the variant names
// none of these (the parser rejects the combinations without an instance).
#include "cuda/conv/conv_fwd_tma.cuh"

namespace linattn::cuda::conv {

template <class E>
bool fwd_tma_knobs2(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  if (p.W != 4 || v.tma_x != 1) return false;
  if (v.tma_y == 3) {
    launch_tma<E, 4, 8, 4, false, 3>(p, stream, v);
    return true;
  }
  if (v.tma_y != 0) return false;
  if (v.ring == 0 && v.ystage == 3) launch_tma<E, 4, 8, 4, false, 0, 3>(p, stream, v);
  else if (v.ring == 0 && v.ystage == 4) launch_tma<E, 4, 8, 4, false, 0, 4>(p, stream, v);
  else if (v.ring == 5) launch_tma<E, 4, 8, 3, false, 0, 3>(p, stream, v);
  else if (v.ring == 1) launch_tma<E, 4, 8, 6, false, 0>(p, stream, v);
  else if (v.ring == 2) launch_tma<E, 4, 16, 3, false, 0>(p, stream, v);
  else return false;
  return true;
}

template bool fwd_tma_knobs2<__nv_bfloat16>(const ConvParams&, cudaStream_t, const FwdVariant&);
template bool fwd_tma_knobs2<__half>(const ConvParams&, cudaStream_t, const FwdVariant&);

}  // namespace linattn::cuda::conv

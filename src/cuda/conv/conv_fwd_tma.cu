// Host side of the v8 bulk-copy forward (conv_fwd_tma.cuh): launch_tma (grid as the v7 variants:
// v6's ~2048 blocks, or blocks= / waves=), the base configuration (8-row tiles x 4 stages, bulk x
// loads, bulk y stores) for every dtype and W 2-4, and the dispatch of fwd_tma: the other
// configurations (x=cp, y=st16 / direct, ring=8x6 / 16x3; v9: x=cp rings and y staging depths) are
// instances for 16-bit types with W = 4 (conv_fwd_tma_knobs{,2}.cu); every other case runs the base
// configuration (with the runtime knobs: order, L2 hints, grid).
#include "cuda/conv/conv_fwd_tma.cuh"

namespace linattn::cuda::conv {

// conv_fwd_tma_knobs.cu / conv_fwd_tma_knobs2.cu: the non-base configurations (16-bit, W = 4); false
// where none applies.
template <class E>
bool fwd_tma_knobs(const ConvParams& p, cudaStream_t stream, const FwdVariant& v);
template <class E>
bool fwd_tma_knobs2(const ConvParams& p, cudaStream_t stream, const FwdVariant& v);

template <class E>
void fwd_tma(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  if (fwd_tma_knobs2<E>(p, stream, v)) return;
  if (fwd_tma_knobs<E>(p, stream, v)) return;
  if (p.W == 2) launch_tma<E, 2, 8, 4, true, 0>(p, stream, v);
  else if (p.W == 3) launch_tma<E, 3, 8, 4, true, 0>(p, stream, v);
  else launch_tma<E, 4, 8, 4, true, 0>(p, stream, v);
}

template <>
bool fwd_tma_knobs<float>(const ConvParams&, cudaStream_t, const FwdVariant&) {
  return false;
}
template <>
bool fwd_tma_knobs2<float>(const ConvParams&, cudaStream_t, const FwdVariant&) {
  return false;
}

template void fwd_tma<float>(const ConvParams&, cudaStream_t, const FwdVariant&);
template void fwd_tma<__nv_bfloat16>(const ConvParams&, cudaStream_t, const FwdVariant&);
template void fwd_tma<__half>(const ConvParams&, cudaStream_t, const FwdVariant&);

}  // namespace linattn::cuda::conv

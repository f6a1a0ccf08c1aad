// The v8 bulk-copy forward's other configurations (conv_fwd_tma.cuh), bf16 / fp16 with W = 4 only
// (the A/B shapes; a separate file so the two halves compile in parallel): x=cp (v6's cp.async
// copies), y=st16 (16-byte stores of the staged tile) / y=direct (v6's 4-byte stores), and the
// 8 x 6 / 16 x 3 rings with bulk copies. Returns false where the variant is the base configuration
// (conv_fwd_tma.cu) or the dtype / W has no such instance.
#include "cuda/conv/conv_fwd_tma.cuh"

namespace linattn::cuda::conv {

template <class E>
bool fwd_tma_knobs(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  if (p.W != 4) return false;
  if (v.ring == 1) launch_tma<E, 4, 8, 6, true, 0>(p, stream, v);
  else if (v.ring == 2) launch_tma<E, 4, 16, 3, true, 0>(p, stream, v);
  else if (v.tma_x == 1 && v.tma_y == 0) launch_tma<E, 4, 8, 4, false, 0>(p, stream, v);
  else if (v.tma_x == 1) launch_tma<E, 4, 8, 4, false, 1>(p, stream, v);  // y=st16 (direct: the same staging)
  else if (v.tma_y == 1) launch_tma<E, 4, 8, 4, true, 1>(p, stream, v);
  else if (v.tma_y == 2) launch_tma<E, 4, 8, 4, true, 2>(p, stream, v);
  else return false;
  return true;
}

template bool fwd_tma_knobs<__nv_bfloat16>(const ConvParams&, cudaStream_t, const FwdVariant&);
template bool fwd_tma_knobs<__half>(const ConvParams&, cudaStream_t, const FwdVariant&);

}  // namespace linattn::cuda::conv

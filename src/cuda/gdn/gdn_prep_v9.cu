// GDN prep v9 (opt-in LINATTN_CUDA_GDN_PREP=v9, BT 64; perf-notes "Prep v9"): prep v8 with value head j + 1's
// diagonal L / P items and 16x16 solves under head j's merges (prep_v7_body's kPipe, gdn_prep_v7_body.cuh). Its own
// translation unit: compiled next to v8's instances, it moved a few FMUL operand orders and shared-memory load widths
// of v8's kernels (the default's SASS stays byte for byte v8's this way). Bitwise v8's values.
#include "cuda/gdn/gdn_prep_v7_body.cuh"

namespace linattn::cuda {

template <class T>
void launch_gdn_prep_v9(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices, int64_t nt_cap,
                        cudaStream_t stream) {
  launch_v7_bt<T, 64, 9>(p, ws, chunk_indices, nt_cap, stream);
}
template void launch_gdn_prep_v9<__nv_bfloat16>(const GdnFwdParams&, const GdnChunkWs&, const int32_t*, int64_t,
                                                cudaStream_t);
template void launch_gdn_prep_v9<__half>(const GdnFwdParams&, const GdnChunkWs&, const int32_t*, int64_t,
                                         cudaStream_t);

int gdn_prep_v9_ctas_per_sm(int G) {  // as launch_v7_t and launch() set the carveout and the opt-in
  return ctas_per_sm(reinterpret_cast<const void*>(gdn_prep_v9_kernel<__nv_bfloat16, 64, true, false>),
                     PrepSmemOf<9, __nv_bfloat16, 64, true>::bytes(G));
}

}  // namespace linattn::cuda

// CUDA body of the static chunk metadata entry point (backend_meta_cuda.h): one launch of
// cuda::build_chunk_meta on ctx.stream (semantics of meta::StaticChunkMetaParams, including
// clamping and saturation at NT_max); no host read, no allocation, capturable.
#include "api/backend_meta_cuda.h"

#if LINATTN_WITH_CUDA
#include "cuda/meta/chunk_meta.h"

namespace linattn::api {

void static_chunk_meta_cuda(const meta::StaticChunkMetaParams& p, const ExecContext& ctx) {
  cuda::build_chunk_meta(p.cu_seqlens, p.cu_int64, p.N_max, p.T_max, p.BT, p.NT_max, p.chunk_indices,
                         p.chunk_offsets, ctx.stream);
}

}  // namespace linattn::api
#endif

// CUDA backend entry points (see backend_cuda.h). Without CUDA they raise Unsupported.
#include "api/backend_cuda.h"

#include "core/check.h"

namespace linattn::api {

#if !LINATTN_WITH_CUDA
void chunk_attn_fwd_cuda(const meta::ChunkAttnDesc&, const ChunkAttnInputs&, const ChunkAttnOutputs&,
                         const ChunkAttnOptions&, const ExecContext&) {
  LINATTN_UNSUPPORTED("backend cuda: this build has no CUDA backend (LINATTN_ENABLE_CUDA=OFF)");
}
void chunk_attn_bwd_cuda(const meta::ChunkAttnDesc&, const ChunkAttnInputs&, const TensorView&,
                         const TensorView&, const ChunkAttnGrads&, const ChunkAttnOptions&,
                         const ExecContext&) {
  LINATTN_UNSUPPORTED("backend cuda: this build has no CUDA backend (LINATTN_ENABLE_CUDA=OFF)");
}
#else
void chunk_attn_fwd_cuda(const meta::ChunkAttnDesc&, const ChunkAttnInputs&, const ChunkAttnOutputs&,
                         const ChunkAttnOptions&, const ExecContext&) {
  LINATTN_UNSUPPORTED("backend cuda: GDN/KDA forward not implemented yet");
}
void chunk_attn_bwd_cuda(const meta::ChunkAttnDesc&, const ChunkAttnInputs&, const TensorView&,
                         const TensorView&, const ChunkAttnGrads&, const ChunkAttnOptions&,
                         const ExecContext&) {
  LINATTN_UNSUPPORTED("backend cuda: GDN/KDA backward not implemented yet");
}
#endif

}  // namespace linattn::api

// CUDA entry point of the static chunk metadata (include/linattn/meta.h prepare_chunk_meta),
// as seen by the api level. The CUDA backend implements it with a kernel that follows
// meta::StaticChunkMetaParams exactly (src/meta/chunk_meta.h: clamping, saturation, sentinels),
// launched on ctx.stream, no host read of cu_seqlens, no allocation, capturable by stream
// capture. The stub body in src/api/meta_api.cc raises Unsupported until it lands.
#pragma once
#include "linattn/ops.h"
#include "meta/chunk_meta.h"

namespace linattn::api {

void static_chunk_meta_cuda(const meta::StaticChunkMetaParams& p, const ExecContext& ctx);

}  // namespace linattn::api

// Bodies of include/linattn/meta.h: eager host metadata, chunk counting, workspace sizes, and
// prepare_chunk_meta dispatching the static metadata kernel by the device of its tensors
// (CPU: recorded when a CPU capture is active; CUDA: src/api/backend_meta_cuda.h).
#include "linattn/meta.h"

#include <cstring>

#include "api/backend_meta_cuda.h"
#include "core/capture.h"
#include "core/check.h"
#include "cpu/chunk_meta_cpu.h"
#include "meta/capacity.h"
#include "meta/chunk_meta.h"
#include "meta/workspace.h"

namespace linattn {

int64_t count_chunks(const TensorView& cu_seqlens, int BT) {
  meta::check_chunk_size(BT, "chunk_size");
  meta::check_cu_seqlens_host(cu_seqlens, -1, false);
  int64_t total = 0;
  for (int64_t n = 0; n + 1 < cu_seqlens.shape[0]; ++n) {
    total += meta::chunks_of(meta::read_cu(cu_seqlens, n + 1) - meta::read_cu(cu_seqlens, n), BT);
  }
  return total;
}

ChunkMetaTables prepare_chunk_meta_eager(const TensorView& cu_seqlens, int BT,
                                         int64_t total_tokens, bool exact_end) {
  const meta::EagerChunkMeta m = meta::build_eager_chunk_meta(cu_seqlens, BT, total_tokens, exact_end);
  ChunkMetaTables t;
  t.num_chunks = m.num_chunks();
  t.chunk_indices = Tensor(DType::kI32, {t.num_chunks, 2});
  t.chunk_offsets = Tensor(DType::kI32, {static_cast<int64_t>(m.offsets.size())});
  if (!m.indices.empty()) {
    std::memcpy(t.chunk_indices.data<int32_t>(), m.indices.data(), m.indices.size() * sizeof(int32_t));
  }
  std::memcpy(t.chunk_offsets.data<int32_t>(), m.offsets.data(), m.offsets.size() * sizeof(int32_t));
  return t;
}

void prepare_chunk_meta(const Capacity& cap, const TensorView& cu_seqlens,
                        const TensorView& chunk_indices, const TensorView& chunk_offsets,
                        const ExecContext& ctx) {
  const meta::StaticChunkMetaParams p =
      meta::make_static_chunk_meta_params(cap, cu_seqlens, chunk_indices, chunk_offsets);
  if (cu_seqlens.device.type == DeviceType::kCPU) {
    run_or_record("chunk_meta", [p] { cpu::static_chunk_meta(p); });
    return;
  }
  // A CPU capture records host closures only; device work is captured by the device's graph.
  LINATTN_CHECK_CODE(active_cpu_capture() == nullptr, ErrorCode::kCaptureViolation,
                     FailureCategory::kAddressOrLifetime, "cu_seqlens: expected device cpu during ",
                     "a CPU graph capture, got ", device_name(cu_seqlens.device));
  api::static_chunk_meta_cuda(p, ctx);
}

size_t chunk_meta_workspace_bytes(const Capacity& cap) {
  cap.validate();
  return meta::workspace_bytes_of([&](meta::Workspace& ws) { meta::carve_chunk_tables(ws, cap); });
}

namespace api {
#if !LINATTN_WITH_CUDA  // the CUDA build's body is in src/api/backend_meta_cuda.cc
void static_chunk_meta_cuda(const meta::StaticChunkMetaParams&, const ExecContext&) {
  LINATTN_UNSUPPORTED("prepare_chunk_meta on cuda: this build has no CUDA backend "
                      "(LINATTN_ENABLE_CUDA=OFF)");
}
#endif
}  // namespace api

}  // namespace linattn

// Eager (host, exact-size) chunk metadata, host cu_seqlens validation, and the static-metadata
// params / workspace tables shared by every backend.
#include "meta/chunk_meta.h"

#include <limits>

#include "core/capture.h"
#include "core/check.h"
#include "meta/capacity.h"
#include "meta/graph_args.h"

namespace linattn::meta {

int64_t read_cu(const TensorView& cu, int64_t i) {
  if (cu.dtype == DType::kI64) return cu.ptr<const int64_t>()[i];
  LINATTN_ASSERT(cu.dtype == DType::kI32, "read_cu on dtype ", dtype_name(cu.dtype));
  return cu.ptr<const int32_t>()[i];
}

void check_cu_seqlens_host(const TensorView& cu, int64_t total_tokens, bool exact_end,
                           const char* arg) {
  constexpr FailureCategory kNone = FailureCategory::kNone;
  constexpr ErrorCode kInv = ErrorCode::kInvalidArgument;
  LINATTN_CHECK(cu.ndim != 0, arg, ": expected a host [N + 1] int32/int64 tensor, got absent");
  check_tensor_sane(cu, arg, kNone);
  LINATTN_CHECK(cu.ndim == 1 && cu.shape[0] >= 2, arg,
                ": expected shape [N + 1] with N >= 1, got ", cu.shape_str());
  LINATTN_CHECK(cu.dtype == DType::kI32 || cu.dtype == DType::kI64, arg,
                ": expected dtype int32 or int64, got ", dtype_name(cu.dtype));
  LINATTN_CHECK(cu.device.type == DeviceType::kCPU, arg,
                ": expected host memory for the eager metadata, got ", device_name(cu.device));
  LINATTN_CHECK(cu.is_contiguous(), arg, ": expected a contiguous tensor, got stride ",
                cu.strides[0]);
  LINATTN_CHECK(cu.data != nullptr, arg, ": expected data, got null for shape ", cu.shape_str());
  const int64_t n1 = cu.shape[0];
  LINATTN_CHECK(read_cu(cu, 0) == 0, arg, "[0]: expected 0, got ", read_cu(cu, 0));
  for (int64_t i = 1; i < n1; ++i) {
    const int64_t prev = read_cu(cu, i - 1), cur = read_cu(cu, i);
    LINATTN_CHECK_CODE(cur >= prev, kInv, kNone, arg, "[", i, "]: expected >= ", arg, "[", i - 1,
                       "] = ", prev, " (non-decreasing), got ", cur);
  }
  const int64_t last = read_cu(cu, n1 - 1);
  constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
  LINATTN_CHECK(last <= kI32Max, arg, "[", n1 - 1, "]: expected <= ", kI32Max, ", got ", last);
  if (total_tokens < 0) return;
  if (exact_end) {
    LINATTN_CHECK(last == total_tokens, arg, "[", n1 - 1, "]: expected T = ", total_tokens,
                  " (total tokens), got ", last);
  } else {
    LINATTN_CHECK(last <= total_tokens, arg, "[", n1 - 1, "]: expected <= T = ", total_tokens,
                  " (total tokens), got ", last);
  }
}

EagerChunkMeta build_eager_chunk_meta(const TensorView& cu, int BT, int64_t total_tokens,
                                      bool exact_end) {
  forbid_host_metadata_during_capture("eager chunk metadata (host-built from cu_seqlens)");
  check_chunk_size(BT, "chunk_size");
  check_cu_seqlens_host(cu, total_tokens, exact_end);
  const int64_t N = cu.shape[0] - 1;
  LINATTN_CHECK(N <= std::numeric_limits<int32_t>::max(), "cu_seqlens: expected N <= INT32_MAX, got ", N);
  EagerChunkMeta m;
  m.offsets.resize(static_cast<size_t>(N + 1));
  int64_t total = 0;
  m.offsets[0] = 0;
  for (int64_t n = 0; n < N; ++n) {
    total += chunks_of(read_cu(cu, n + 1) - read_cu(cu, n), BT);
    m.offsets[n + 1] = static_cast<int32_t>(total);  // <= c_N <= INT32_MAX
  }
  m.indices.resize(static_cast<size_t>(2 * total));
  for (int64_t n = 0; n < N; ++n) {
    for (int32_t c = 0; c < m.offsets[n + 1] - m.offsets[n]; ++c) {
      const int64_t r = m.offsets[n] + c;
      m.indices[2 * r] = static_cast<int32_t>(n);
      m.indices[2 * r + 1] = c;
    }
  }
  return m;
}

StaticChunkMetaParams make_static_chunk_meta_params(const Capacity& cap, const TensorView& cu,
                                                    const TensorView& chunk_indices,
                                                    const TensorView& chunk_offsets) {
  GraphMetaArgs a;
  a.cu_seqlens = cu;
  a.chunk_indices = chunk_indices;
  a.chunk_offsets = chunk_offsets;
  a.max_num_seqs = cap.N_max;
  a.T_max = cap.T_max;
  a.BT = cap.BT;
  a.device = cu.device;
  a.require_tables = true;
  const Capacity c = check_graph_meta_args(a);
  StaticChunkMetaParams p;
  p.cu_seqlens = cu.data;
  p.cu_int64 = cu.dtype == DType::kI64;
  p.T_max = c.T_max;
  p.N_max = c.N_max;
  p.NT_max = c.NT_max();
  p.BT = c.BT;
  p.chunk_indices = chunk_indices.ptr<int32_t>();
  p.chunk_offsets = chunk_offsets.ptr<int32_t>();
  return p;
}

ChunkTables carve_chunk_tables(Workspace& ws, const Capacity& cap) {
  ChunkTables t;
  t.indices = ws.take<int32_t>("chunk_indices", 2 * cap.NT_max());
  t.offsets = ws.take<int32_t>("chunk_offsets", cap.N_max + 1);
  return t;
}

}  // namespace linattn::meta

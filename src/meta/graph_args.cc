// Graph-mode argument validation (see graph_args.h for the categories).
#include "meta/graph_args.h"

#include <cstdint>
#include <limits>

#include "core/check.h"
#include "meta/capacity.h"

namespace linattn::meta {

namespace {

constexpr ErrorCode kInv = ErrorCode::kInvalidArgument;
constexpr FailureCategory kMeta = FailureCategory::kStaleOrDynamicMetadata;
constexpr FailureCategory kTables = FailureCategory::kSentinelOffsetOrPadding;
constexpr FailureCategory kAddr = FailureCategory::kAddressOrLifetime;
constexpr int64_t kMaxDim = int64_t{1} << 40;

// Byte range [lo, hi) of a sane contiguous tensor.
struct Range { uintptr_t lo, hi; };
Range byte_range(const TensorView& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  const uintptr_t lo = reinterpret_cast<uintptr_t>(t.data);
  return {lo, lo + static_cast<uintptr_t>(n) * dtype_size(t.dtype)};
}

void check_disjoint(const TensorView& a, const char* an, const TensorView& b, const char* bn) {
  if (!a.defined() || !b.defined()) return;
  const Range ra = byte_range(a), rb = byte_range(b);
  const bool overlap = ra.lo < rb.hi && rb.lo < ra.hi;
  LINATTN_CHECK_CODE(!overlap, kInv, kAddr, an, ": expected a buffer disjoint from ", bn,
                     ", got overlapping ranges [", a.data, ", +", ra.hi - ra.lo, ") and [", b.data,
                     ", +", rb.hi - rb.lo, ")");
}

void check_table(const TensorView& t, const char* arg, int64_t rows, int cols, Device device,
                 bool required) {
  if (t.ndim == 0) {
    LINATTN_CHECK_CODE(!required, kInv, kTables, arg, ": expected a static int32 table with ", rows,
                       " rows, got absent");
    return;
  }
  check_tensor_sane(t, arg, kTables);
  const int rank = cols ? 2 : 1;
  const bool shape_ok = t.ndim == rank && t.shape[0] == rows && (!cols || t.shape[1] == cols);
  if (cols) {
    LINATTN_CHECK_CODE(shape_ok, kInv, kTables, arg, ": expected shape [", rows, ", ", cols,
                       "] (NT_max = ceil(T_max/BT) + N_max - 1), got ", t.shape_str());
  } else {
    LINATTN_CHECK_CODE(shape_ok, kInv, kTables, arg, ": expected shape [", rows,
                       "] (N_max + 1), got ", t.shape_str());
  }
  LINATTN_CHECK_CODE(t.dtype == DType::kI32, kInv, kTables, arg, ": expected dtype int32, got ",
                     dtype_name(t.dtype));
  check_static_buffer(t, arg, device);
}

}  // namespace

void check_tensor_sane(const TensorView& t, const char* arg, FailureCategory category) {
  LINATTN_CHECK_CODE(t.ndim >= 0 && t.ndim <= kMaxDims, kInv, category, arg,
                     ": expected rank in [0, ", kMaxDims, "], got ", t.ndim);
  for (int i = 0; i < t.ndim; ++i) {
    LINATTN_CHECK_CODE(t.shape[i] >= 0 && t.shape[i] <= kMaxDim, kInv, category, arg,
                       ": expected dim ", i, " in [0, 2^40], got ", t.shape[i]);
  }
}

void check_static_buffer(const TensorView& t, const char* arg, Device device) {
  LINATTN_CHECK_CODE(t.device == device, kInv, kAddr, arg, ": expected device ",
                     device_name(device), ", got ", device_name(t.device));
  LINATTN_CHECK_CODE(t.is_contiguous(), kInv, kAddr, arg,
                     ": expected a contiguous (row-major) buffer, got shape ", t.shape_str());
  bool empty = false;
  for (int i = 0; i < t.ndim; ++i) empty |= t.shape[i] == 0;
  LINATTN_CHECK_CODE(empty || t.data != nullptr, kInv, kAddr, arg,
                     ": expected a static buffer, got null data for shape ", t.shape_str());
}

Capacity check_graph_meta_args(const GraphMetaArgs& a) {
  check_chunk_size(a.BT, "chunk_size");
  const TensorView& cu = a.cu_seqlens;
  LINATTN_CHECK_CODE(cu.ndim != 0, kInv, kMeta,
                     "cu_seqlens: expected a static [max_num_seqs + 1] int32/int64 buffer in graph "
                     "mode (max_num_seqs = ", a.max_num_seqs, "), got absent");
  check_tensor_sane(cu, "cu_seqlens", kMeta);
  LINATTN_CHECK_CODE(cu.ndim == 1, kInv, kMeta, "cu_seqlens: expected rank 1, got shape ",
                     cu.shape_str());
  LINATTN_CHECK_CODE(cu.dtype == DType::kI32 || cu.dtype == DType::kI64, kInv, kMeta,
                     "cu_seqlens: expected dtype int32 or int64, got ", dtype_name(cu.dtype));
  LINATTN_CHECK_CODE(a.max_num_seqs >= 1, kInv, kMeta, "max_num_seqs: expected >= 1, got ",
                     a.max_num_seqs);
  LINATTN_CHECK_CODE(a.max_num_seqs == cu.shape[0] - 1, kInv, kMeta,
                     "max_num_seqs: expected cu_seqlens.size(0) - 1 = ", cu.shape[0] - 1, ", got ",
                     a.max_num_seqs);
  check_static_buffer(cu, "cu_seqlens", a.device);

  constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
  LINATTN_CHECK_CODE(a.T_max >= 1 && a.T_max <= kI32Max, kInv, kMeta,
                     "T_max (tokens of the static inputs): expected in [1, ", kI32Max, "], got ",
                     a.T_max);
  LINATTN_CHECK_CODE(a.max_num_seqs <= kI32Max - chunks_of(a.T_max, a.BT), kInv, kMeta,
                     "max_num_seqs: expected NT_max = ceil(T_max/BT) + N_max - 1 <= ", kI32Max,
                     " (int32 tables), got N_max = ", a.max_num_seqs, " with T_max = ", a.T_max);
  const Capacity cap = make_capacity(a.T_max, a.max_num_seqs, a.BT);

  check_table(a.chunk_indices, "chunk_indices", cap.NT_max(), 2, a.device, a.require_tables);
  check_table(a.chunk_offsets, "chunk_offsets", cap.N_max + 1, 0, a.device, a.require_tables);
  check_disjoint(a.chunk_indices, "chunk_indices", cu, "cu_seqlens");
  check_disjoint(a.chunk_offsets, "chunk_offsets", cu, "cu_seqlens");
  check_disjoint(a.chunk_indices, "chunk_indices", a.chunk_offsets, "chunk_offsets");
  return cap;
}

}  // namespace linattn::meta

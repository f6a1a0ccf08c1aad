// Encoding of the v9 tile-store tensor map (conv_fwd_tma_map.h): cuTensorMapEncodeTiled through the
// runtime's driver entry point (looked up once), uint32 elements, no interleave / swizzle, L2
// promotion none, the last map cached under a mutex (the forward of one buffer set re-encodes nothing).
#include "cuda/conv/conv_fwd_tma_map.h"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstring>
#include <mutex>

#include "core/check.h"
#include "cuda/common/check.h"

namespace linattn::cuda::conv {

CUtensorMap conv_y_tile_map(void* y, uint64_t rows, uint64_t row_bytes, uint64_t stride_bytes, uint32_t box_rows) {
  LINATTN_CHECK(y != nullptr && reinterpret_cast<uintptr_t>(y) % 16 == 0,
                "conv_y_tile_map: y: expected a 16-byte aligned device pointer, got ", y);
  LINATTN_CHECK(row_bytes % 16 == 0 && stride_bytes % 16 == 0 && stride_bytes >= row_bytes,
                "conv_y_tile_map: expected 16-byte multiples with stride >= row, got row ", row_bytes, " stride ",
                stride_bytes);
  LINATTN_CHECK(rows >= 1 && box_rows >= 1 && box_rows <= 256, "conv_y_tile_map: rows ", rows, ", box rows ",
                box_rows);
  static std::mutex mu;
  static CUtensorMap last{};
  static uint64_t key[5] = {0, 0, 0, 0, 0};
  const uint64_t k[5] = {reinterpret_cast<uint64_t>(y), rows, row_bytes, stride_bytes, box_rows};
  std::lock_guard<std::mutex> lock(mu);
  if (std::memcmp(k, key, sizeof(k)) == 0) return last;
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    LINATTN_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
    LINATTN_CHECK(q == cudaDriverEntryPointSuccess && fn != nullptr,
                  "conv_y_tile_map: the driver has no cuTensorMapEncodeTiled (needs a CUDA 12+ driver)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  CUtensorMap map{};
  const cuuint64_t dims[2] = {row_bytes / 4, rows};  // innermost first
  const cuuint64_t strides[1] = {stride_bytes};       // bytes, dims 1..
  const cuuint32_t box[2] = {256, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, y, dims, strides, box, elem_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  LINATTN_CHECK(r == CUDA_SUCCESS, "conv_y_tile_map: cuTensorMapEncodeTiled failed with CUresult ", static_cast<int>(r),
                " (", rows, " rows x ", row_bytes, " bytes, stride ", stride_bytes, ", box ", box_rows, " rows)");
  last = map;
  std::memcpy(key, k, sizeof(k));
  return last;
}

}  // namespace linattn::cuda::conv

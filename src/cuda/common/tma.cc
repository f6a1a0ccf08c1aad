// TMA tensor-map encoding (see tma.h). The driver function is looked up once.
#include "cuda/common/tma.h"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "core/check.h"
#include "cuda/common/check.h"

namespace linattn::cuda {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    LINATTN_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    LINATTN_CHECK(q == cudaDriverEntryPointSuccess && p != nullptr,
                  "make_tma_2d_sw128: the driver has no cuTensorMapEncodeTiled (needs a CUDA 12+ driver)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace

CUtensorMap make_tma_2d_sw128(const void* base, bool bf16, uint64_t rows, uint64_t cols, uint64_t row_stride,
                              uint32_t box_rows) {
  LINATTN_CHECK(base != nullptr && reinterpret_cast<uintptr_t>(base) % 16 == 0,
                "make_tma_2d_sw128: base: expected a 16-byte aligned device pointer, got ", base);
  LINATTN_CHECK(row_stride % 8 == 0 && row_stride >= cols, "make_tma_2d_sw128: row_stride: expected a multiple of 8 >= cols (",
                cols, "), got ", row_stride);
  LINATTN_CHECK(box_rows >= 1 && box_rows <= 256, "make_tma_2d_sw128: box_rows: expected 1..256, got ", box_rows);
  LINATTN_CHECK(rows >= 1 && cols >= 1, "make_tma_2d_sw128: expected a non-empty matrix, got ", rows, " x ", cols);
  CUtensorMap map{};
  const cuuint64_t dims[2] = {cols, rows};                  // innermost first
  const cuuint64_t strides[1] = {row_stride * 2};           // bytes, dims 1..
  const cuuint32_t box[2] = {64, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_fn()(&map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
                                 const_cast<void*>(base), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                 CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  LINATTN_CHECK(r == CUDA_SUCCESS, "make_tma_2d_sw128: cuTensorMapEncodeTiled failed with CUresult ", int(r), " (",
                rows, " x ", cols, ", row_stride ", row_stride, ", box ", box_rows, " x 64)");
  return map;
}

}  // namespace linattn::cuda

// Host side of the Hopper tensor-memory accelerator (TMA): encodes 2-D tensor maps through the
// driver entry point (cudaGetDriverEntryPointByVersion, so nothing links libcuda directly).
// Maps are built at plan time and passed to kernels by value (__grid_constant__); building one
// never touches a stream, so it is capture-safe.
#pragma once
#include <cuda.h>

#include <cstdint>

namespace linattn::cuda {

// A 16-bit (bf16 / fp16) row-major matrix [rows, cols] with `row_stride` elements between rows
// (a multiple of 8, base 16-byte aligned), read in boxes of box_rows x 64 elements (128 bytes,
// the 128-byte swizzle: a box lands in shared memory exactly as sw128_offset in wgmma.cuh lays
// out a K-major panel). Rows / columns past the matrix read as zero.
CUtensorMap make_tma_2d_sw128(const void* base, bool bf16, uint64_t rows, uint64_t cols, uint64_t row_stride,
                              uint32_t box_rows);

}  // namespace linattn::cuda

// The tensor map of the v9 tile stores (conv_fwd_tma.cuh, y=tile): y's rows viewed as uint32
// [rows, row_bytes / 4] with the given row stride, box 256 x box_rows (1 KiB of box_rows rows, no
// swizzle). Host only; the last map is cached (same buffer and shape: no re-encode per call).
#pragma once
#include <cuda.h>

#include <cstdint>

namespace linattn::cuda::conv {

CUtensorMap conv_y_tile_map(void* y, uint64_t rows, uint64_t row_bytes, uint64_t stride_bytes, uint32_t box_rows);

}  // namespace linattn::cuda::conv

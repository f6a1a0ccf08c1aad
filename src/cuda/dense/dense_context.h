// Per-(device, stream) state of the CUDA dense ops (see dense_cuda.h): cuBLAS handle, cuBLAS
// workspace, RMSNorm-backward partials. Internal to src/cuda/dense.
#pragma once
#include <cstddef>

namespace linattn::cuda::dense {

// Blocks of the RMSNorm backward (fixed, so its dw summation order depends on R only).
constexpr int kNormPartialBlocks = 264;

// Partials scratch of at least `floats` floats for (device, stream). Grows outside capture only;
// a grown-out buffer is kept alive (a captured graph may point into it).
float* partials(int device, void* stream, size_t floats);

}  // namespace linattn::cuda::dense

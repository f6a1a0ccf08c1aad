// Self-test entry of the wgmma wrappers (wgmma.cuh): one warpgroup computes
// C [64, N] = A [64, K] x B [N, K]^T (bf16 in, fp32 out; all dense row-major device buffers)
// with both operands staged in 128-byte-swizzled shared memory, K-major or MN-major per operand
// (the layouts the fused GDN / KDA kernels need: Q K^T is K-major x K-major, K^T V is MN-major
// x MN-major). N in {64, 128}, K a multiple of 64 up to 256. Asynchronous on `stream`; sm_90 only
// (Unsupported elsewhere).
#pragma once

namespace linattn::cuda {

void wgmma_probe_gemm(const void* A, const void* B, float* C, int N, int K, bool a_mn_major, bool b_mn_major,
                      void* stream);
// The same product, both operands K-major, loaded into shared memory by TMA (tma.h / tma.cuh).
void wgmma_probe_gemm_tma(const void* A, const void* B, float* C, int N, int K, void* stream);

}  // namespace linattn::cuda
